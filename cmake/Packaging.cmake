# The Debian package for GPU hosts without Kubernetes (docs/install-host.md):
#
#   cmake --build build-rel --target package      ->  build-rel/gpunode_<version>_<arch>.deb
#
# Install rules plus CPack's DEB generator. Why CPack and not a dpkg-deb script: the file list lives
# in these install rules next to the targets, the version comes from project(), and CPack computes
# Depends with dpkg-shlibdeps from the binary actually built (static or dynamic gRPC, whatever
# libraries the Release build links); a script would repeat all three and drift. The maintainer
# scripts, the conffile list and the units are plain files (packaging/deb/, deploy/host/), so the
# package is readable without knowing CPack.
#
# The layout is Debian's, rooted at /: the rules install to usr/bin, etc/gpunode, ... below the
# prefix, and the package's prefix is /. (`cmake --install build-rel --prefix /` puts the same files on
# this machine without dpkg; dpkg is the supported way because removal is what undoes the changes.)
#
# The man page and the completion scripts are made at package time by the gpunode just built
# (`gpunode man`, `gpunode completion bash|zsh|fish`: docs/completion.md), so they always list the
# commands and options of the packaged binary.

set(_pkg_dir ${PROJECT_SOURCE_DIR}/packaging/deb)
set(_pkg_gen ${PROJECT_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${_pkg_gen})

# The program and NVIDIA's names for it (gpunode dispatches on argv[0]; src/cli/main.cc). Relative
# links, as Debian policy 10.5 wants within one directory.
install(TARGETS gpunode RUNTIME DESTINATION usr/bin COMPONENT gpunode)
set(GPUNODE_NVIDIA_NAMES nvidia-ctk nvidia-container-runtime nvidia-container-runtime-hook)
foreach(name IN LISTS GPUNODE_NVIDIA_NAMES)
  file(CREATE_LINK gpunode ${_pkg_gen}/${name} SYMBOLIC)
  file(CREATE_LINK gpunode.1.gz ${_pkg_gen}/${name}.1.gz SYMBOLIC)
  install(FILES ${_pkg_gen}/${name} DESTINATION usr/bin COMPONENT gpunode)
  install(FILES ${_pkg_gen}/${name}.1.gz DESTINATION usr/share/man/man1 COMPONENT gpunode)
endforeach()

# Man page and completions from the built binary, written at install (package) time.
foreach(d bash zsh fish)
  file(MAKE_DIRECTORY ${_pkg_gen}/${d})
endforeach()
install(CODE "
  function(_gpunode_out out)
    execute_process(COMMAND \"$<TARGET_FILE:gpunode>\" \${ARGN} OUTPUT_FILE \"\${out}\" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR \"gpunode \${ARGN} failed (\${rc}): the package needs its output\")
    endif()
  endfunction()
  _gpunode_out(\"${_pkg_gen}/gpunode.1\" man)
  _gpunode_out(\"${_pkg_gen}/bash/gpunode\" completion bash)
  _gpunode_out(\"${_pkg_gen}/zsh/_gpunode\" completion zsh)
  _gpunode_out(\"${_pkg_gen}/fish/gpunode.fish\" completion fish)
  execute_process(COMMAND gzip -9nf \"${_pkg_gen}/gpunode.1\" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR \"gzip of the man page failed\")
  endif()
" COMPONENT gpunode)
install(FILES ${_pkg_gen}/gpunode.1.gz DESTINATION usr/share/man/man1 COMPONENT gpunode)
install(FILES ${_pkg_gen}/bash/gpunode DESTINATION usr/share/bash-completion/completions COMPONENT gpunode)
install(FILES ${_pkg_gen}/zsh/_gpunode DESTINATION usr/share/zsh/vendor-completions COMPONENT gpunode)
install(FILES ${_pkg_gen}/fish/gpunode.fish DESTINATION usr/share/fish/vendor_completions.d COMPONENT gpunode)

# The agent without Kubernetes: its unit and its config (a conffile: packaging/deb/conffiles).
install(FILES ${PROJECT_SOURCE_DIR}/deploy/host/gpunode-agent.service DESTINATION usr/lib/systemd/system COMPONENT gpunode)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/host/agent.yaml DESTINATION etc/gpunode COMPONENT gpunode)

# /usr/share/doc/gpunode: copyright and the (native) changelog, gzip'd as policy 12.7 wants.
configure_file(${_pkg_dir}/changelog.in ${_pkg_gen}/changelog @ONLY)
install(CODE "
  execute_process(COMMAND gzip -9nc \"${_pkg_gen}/changelog\" OUTPUT_FILE \"${_pkg_gen}/changelog.gz\" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR \"gzip of the changelog failed\")
  endif()
" COMPONENT gpunode)
install(FILES ${_pkg_dir}/copyright ${_pkg_gen}/changelog.gz DESTINATION usr/share/doc/gpunode COMPONENT gpunode)
# The user docs the messages and --help name as docs/<page>.md (the image ships them at the same place).
file(GLOB _gpunode_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION usr/share/doc/gpunode COMPONENT gpunode)
install(FILES ${_gpunode_docs} DESTINATION usr/share/doc/gpunode/docs COMPONENT gpunode)

# CPack: one .deb, Debian's file name (gpunode_<version>_<arch>.deb).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpunode)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "NVIDIA GPU node stack: doctor, CDI, container runtime hook, exporter")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "gpunode checks every layer of an NVIDIA GPU host (doctor), writes the CDI spec
for podman and containerd, configures Docker, containerd and CRI-O, and runs
containers with GPUs through its OCI runtime shim and hook. It answers to
NVIDIA's command names (nvidia-ctk, nvidia-container-runtime,
nvidia-container-runtime-hook). The gpunode-agent service keeps the CDI spec
current across driver upgrades, validates the GPUs and serves
dcgm-exporter's metrics, without Kubernetes.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "gpunode maintainers <maintainers@users.noreply.a-seed-02cd8d12.example>")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The files under NVIDIA's names must never replace NVIDIA's own: dpkg refuses to install both
# (docs/install-host.md, "NVIDIA's packages"). No Provides: packages that depend on NVIDIA's
# toolkit expect nvidia-container-cli and libnvidia-container, which gpunode does not ship.
set(CPACK_DEBIAN_PACKAGE_CONFLICTS
    "nvidia-container-toolkit, nvidia-container-toolkit-base, nvidia-container-runtime, libnvidia-container-tools")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "docker.io | podman")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${_pkg_dir}/conffiles ${_pkg_dir}/preinst ${_pkg_dir}/postinst ${_pkg_dir}/prerm ${_pkg_dir}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_POST_BUILD_SCRIPTS ${_pkg_dir}/installed-size.cmake)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR})
set(CPACK_OUTPUT_CONFIG_FILE ${PROJECT_BINARY_DIR}/CPackConfig.cmake)
include(CPack)
