# GPUNODE_STATIC_DEPS (ON by default for Release builds, see CMakeLists.txt): the gpunode executable takes Debian's gRPC,
# grpc++, protobuf, upb, abseil, re2, c-ares, address_sorting and yaml-cpp from their .a files
# instead of their shared libraries, so a process maps only the parts it uses and the loader
# relocates ~70 fewer shared objects. Measured in
# benchmarks/results/footprint-static-link-sim-2026-12-01.md.
#
# Stays dynamic: libc, libstdc++, libgcc_s (gpunode dlopen()s libnvidia-ml, and libfmt.so /
# libcpp-httplib.so need libstdc++.so anyway); OpenSSL, zlib, brotli and fmt (Debian ships no
# libfmt.a or libcpp-httplib.a, and libcpp-httplib.so, the kube client, needs libssl.so and
# libcrypto.so: a static OpenSSL would be a second copy). Only the executable changes: the shared
# simulated NVML cannot take Debian's absl .a (initial-exec TLS, R_X86_64_TPOFF32), and the
# libraries' imported targets stay as they are. Not for sanitizer or fuzz builds (scripts/test.sh's
# build-asan links dynamically).
#
# GPUNODE_STATIC_DEPS_NO_PIE (OFF unless asked for): link gpunode as a fixed-address (-no-pie) executable,
# so the ~17,600 R_X86_64_RELATIVE relocations the archives bring (vtables, .data.rel.ro, GOT) are
# resolved at link time and their pages are not dirtied at start-up: another -0.5 to -0.7 MiB per
# process on the H200. The cost is ASLR for the executable's own image (libraries, heap and stacks
# stay randomised), which a privileged DaemonSet should keep: hence opt-in. The objects are compiled the same either way.
#
#   gpunode_static_deps_link(<executable>)
#     puts the archives, as one --start-group, in front of the shared libraries the executable's
#     dependencies bring, and links it --as-needed, so those shared libraries resolve nothing and
#     are not recorded as needed.
if(GPUNODE_STATIC_DEPS AND (GPUNODE_SANITIZE OR GPUNODE_FUZZ))
  message(FATAL_ERROR "GPUNODE_STATIC_DEPS is for Release builds; sanitizer and fuzz builds link dynamically")
endif()

# Which libraries of `pkg-config --static --libs` come from their .a files.
set(GPUNODE_STATIC_DEPS_REGEX "^(grpc|grpc\\+\\+|gpr|upb|address_sorting|re2|cares|protobuf|absl_.*|yaml-cpp)$")
# The pkg-config modules behind gpunode's gRPC (proto/), abseil (src/base) and yaml-cpp.
set(GPUNODE_STATIC_DEPS_MODULES grpc++ protobuf absl_status absl_statusor absl_strings absl_cord
    absl_str_format absl_flat_hash_map absl_hash absl_synchronization yaml-cpp)

function(gpunode_static_deps_link target)
  find_package(PkgConfig REQUIRED)
  # One `pkg-config --static --libs-only-l` (~2 s: every query walks abseil's ~130 .pc files);
  # pkg_check_modules asked seven times, ~30 s of a cold configure
  # (benchmarks/results/cold-start-2026-12-03.md).
  execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --static --libs-only-l ${GPUNODE_STATIC_DEPS_MODULES}
                  OUTPUT_VARIABLE libs ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "GPUNODE_STATIC_DEPS: pkg-config --static ${GPUNODE_STATIC_DEPS_MODULES}: ${err}")
  endif()
  separate_arguments(libs UNIX_COMMAND "${libs}")
  set(names)
  foreach(l ${libs})
    if(l MATCHES "^-l(.+)$")
      list(APPEND names ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(archives)
  set(others)
  foreach(name ${names})
    if(name MATCHES "${GPUNODE_STATIC_DEPS_REGEX}")
      find_library(_gpunode_sd_${name} NAMES lib${name}.a NO_CACHE)
      if(NOT _gpunode_sd_${name})
        message(FATAL_ERROR "GPUNODE_STATIC_DEPS: lib${name}.a not found")
      endif()
      list(APPEND archives ${_gpunode_sd_${name}})
    elseif(NOT name IN_LIST others)
      list(APPEND others ${name})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES archives)
  # The archives need each other in both directions (grpc <-> gpr/upb, abseil's web): one group.
  target_link_libraries(${target} PRIVATE -Wl,--start-group ${archives} -Wl,--end-group ${others})
  target_link_options(${target} PRIVATE LINKER:--as-needed)
  if(GPUNODE_STATIC_DEPS_NO_PIE)
    target_link_options(${target} PRIVATE -no-pie)
  endif()
endfunction()
