// Text we did not write (API server answers: Node names, labels, condition reasons and messages;
// host files; vendors' specs) made safe to print on a terminal. A terminal obeys control
// characters and escape sequences in what it prints: ESC [2J clears the screen, OSC 0 sets the
// window title, OSC 52 writes the clipboard, OSC 8 makes a link, and C1 controls (U+0080..U+009F)
// start the same sequences on terminals that take them. So every text renderer that prints a
// foreign string passes it through one of these first; JSON and YAML output need not (their
// encoders escape control characters), HTML has HtmlEscape (html.h).
#ifndef GPUNODE_BASE_TERMINAL_H_
#define GPUNODE_BASE_TERMINAL_H_

#include <string>
#include <string_view>

namespace gpunode {

// One line (a table cell, a message): every C0 control (U+0000..U+001F: ESC, BEL, CR, LF, tab
// too), DEL, every C1 control (U+0080..U+009F), and the Unicode bidirectional overrides and
// isolates (U+202A..U+202E, U+2066..U+2069: they reorder what the reader sees) are shown escaped
// (\x1b, \n, \t, \r, \x7f, \u009b, \u202e); a byte that is not part of valid UTF-8 is shown as
// \xNN. Everything else, valid UTF-8 included, is kept as it is. Idempotent on its own output.
std::string TerminalSafe(std::string_view text);

// The same for a whole rendered text that we own but that has foreign strings inside (a report
// printed at once): newlines and tabs are kept; with `keep_colors`, also the SGR colour sequences
// ESC [ <digits and ;> m that our renderers add. Every other sequence is escaped as above, so a
// foreign string can at most change colours, never move the cursor, clear the screen, set the
// title or write the clipboard. Prefer TerminalSafe on each foreign string where the renderer is
// ours to change.
std::string TerminalSafeText(std::string_view text, bool keep_colors);

}  // namespace gpunode

#endif  // GPUNODE_BASE_TERMINAL_H_
