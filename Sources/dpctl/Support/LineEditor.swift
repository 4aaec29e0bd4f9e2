import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Line editing for `dpctl shell` and `dpctl sql` on a terminal: the keys of readline and
/// libedit's emacs mode, in Swift, with no C library to install.
///
/// - ← →, Home End (Ctrl-A Ctrl-E), Ctrl-B Ctrl-F: move; Alt-B Alt-F: by word.
/// - Backspace (Ctrl-H), Delete, Ctrl-D on a non-empty line: delete a character;
///   Ctrl-K Ctrl-U Ctrl-W: delete to the end, to the start, the word before.
/// - ↑ ↓ (Ctrl-P Ctrl-N): history of this session (consecutive repeats kept once).
/// - Ctrl-C: abandon the line; Ctrl-D on an empty line: end of input; Ctrl-L: clear the screen.
///
/// The terminal is raw from ``start()`` to ``finish()`` (output processing stays on, so
/// results print as usual). Lines wider than the terminal are redrawn on one row: the
/// terminal wraps them, which is cosmetic only.
final class LineEditor {
    private let input: FileDescriptor
    private let output: FileDescriptor
    private(set) var history: [String] = []

    /// An editor on standard input and output, or `nil` when either is not a terminal (or
    /// `TERM` is `dumb`): then lines are read as they come.
    init?(input: FileDescriptor = .standardInput, output: FileDescriptor = .standardOutput) {
        guard isatty(input.rawValue) == 1, isatty(output.rawValue) == 1,
              ProcessInfo.processInfo.environment["TERM"] != "dumb" else { return nil }
        self.input = input
        self.output = output
    }

    /// The terminal's settings before ``start()``, restored by ``finish()``.
    private var saved: termios?

    /// Puts the terminal in raw mode for the session: keys arrive one by one, unechoed, and
    /// Ctrl-C as a byte (it abandons the line); output processing stays, so printed lines
    /// end as usual. Raw for the whole session, not line by line, so that keys typed ahead
    /// while a statement runs are read as keys too.
    func start() {
        var current = termios()
        guard saved == nil, tcgetattr(input.rawValue, &current) == 0 else { return }
        var raw = current
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
        raw.c_iflag &= ~tcflag_t(IXON | ICRNL | INLCR)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        if tcsetattr(input.rawValue, TCSADRAIN, &raw) == 0 { saved = current }
    }

    /// Gives the terminal back its settings.
    func finish() {
        guard var settings = saved else { return }
        _ = tcsetattr(input.rawValue, TCSADRAIN, &settings)
        saved = nil
    }

    deinit { finish() }

    /// The next line, edited, after `prompt`; `nil` at the end of input.
    func readLine(prompt: String) -> String? {
        guard saved != nil else {
            write(prompt)
            return Swift.readLine()
        }
        var state = LineState(prompt: prompt, history: history)
        state.redraw(to: output)
        while let key = nextKey() {
            switch state.apply(key) {
            case .editing:
                state.redraw(to: output)
            case .done(let line):
                write("\r\n")
                if let line, !line.isEmpty, history.last != line { history.append(line) }
                return line
            case .abandoned:
                write("^C\r\n")
                state = LineState(prompt: prompt, history: history)
                state.redraw(to: output)
            case .clearScreen:
                write("\u{1B}[H\u{1B}[2J")
                state.redraw(to: output)
            }
        }
        write("\r\n")
        return nil
    }

    private func write(_ text: String) {
        _ = try? output.writeAll(Array(text.utf8))
    }

    /// One byte of input; `nil` at its end or on an error.
    private func readByte() -> UInt8? {
        var byte: UInt8 = 0
        let count = try? withUnsafeMutableBytes(of: &byte) { try input.read(into: $0, retryOnInterrupt: true) }
        return count == 1 ? byte : nil
    }

    /// The next key: a character (its UTF-8 sequence decoded), a control byte or an escape sequence.
    private func nextKey() -> LineState.Key? {
        guard let byte = readByte() else { return nil }
        switch byte {
        case 0x1B:
            guard let next = readByte() else { return .escape }
            if next == UInt8(ascii: "[") || next == UInt8(ascii: "O") {
                var parameters = ""
                while let final = readByte() {
                    if (0x40...0x7E).contains(final) {
                        return LineState.Key.sequence(parameters + String(UnicodeScalar(final)))
                    }
                    parameters.append(Character(UnicodeScalar(final)))
                }
                return nil
            }
            if next == UInt8(ascii: "b") { return .wordLeft }
            if next == UInt8(ascii: "f") { return .wordRight }
            return .escape
        case 0x00..<0x20, 0x7F:
            return .control(byte)
        default:
            // A UTF-8 sequence: its length from the lead byte.
            let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1
            var bytes = [byte]
            while bytes.count < length, let continuation = readByte() { bytes.append(continuation) }
            let text = String(decoding: bytes, as: UTF8.self)
            return text.first.map { .character($0) }
        }
    }
}

/// The line being edited: its characters, the cursor and the place in the history.
struct LineState {
    enum Key: Equatable {
        case character(Character)
        case control(UInt8)
        /// An escape sequence after `ESC [` or `ESC O`: its parameters and final byte (`"A"`, `"3~"`).
        case sequence(String)
        case wordLeft, wordRight, escape
    }

    enum Outcome: Equatable {
        case editing
        /// The line is finished (`nil`: the end of input).
        case done(String?)
        case abandoned
        case clearScreen
    }

    let prompt: String
    private(set) var characters: [Character] = []
    private(set) var cursor = 0
    /// The history with the line being typed last; `entry` indexes it.
    private var entries: [[Character]]
    private var entry: Int

    init(prompt: String, history: [String]) {
        self.prompt = prompt
        entries = history.map { Array($0) } + [[]]
        entry = entries.count - 1
    }

    var line: String { String(characters) }

    mutating func apply(_ key: Key) -> Outcome {
        switch key {
        case .character(let character):
            characters.insert(character, at: cursor)
            cursor += 1
        case .control(let byte):
            return control(byte)
        case .sequence(let sequence):
            switch sequence {
            case "A": recall(entry - 1)
            case "B": recall(entry + 1)
            case "C": cursor = min(characters.count, cursor + 1)
            case "D": cursor = max(0, cursor - 1)
            case "H", "1~", "7~": cursor = 0
            case "F", "4~", "8~": cursor = characters.count
            case "3~": if cursor < characters.count { characters.remove(at: cursor) }
            case "1;5C", "1;3C": cursor = wordEnd(from: cursor)
            case "1;5D", "1;3D": cursor = wordStart(from: cursor)
            default: break
            }
        case .wordLeft:
            cursor = wordStart(from: cursor)
        case .wordRight:
            cursor = wordEnd(from: cursor)
        case .escape:
            break
        }
        return .editing
    }

    private mutating func control(_ byte: UInt8) -> Outcome {
        switch byte {
        case 0x0D, 0x0A: return .done(line)                                          // Enter
        case 0x03: return .abandoned                                                  // Ctrl-C
        case 0x04:                                                                    // Ctrl-D
            if characters.isEmpty { return .done(nil) }
            if cursor < characters.count { characters.remove(at: cursor) }
        case 0x01: cursor = 0                                                         // Ctrl-A
        case 0x05: cursor = characters.count                                          // Ctrl-E
        case 0x02: cursor = max(0, cursor - 1)                                        // Ctrl-B
        case 0x06: cursor = min(characters.count, cursor + 1)                         // Ctrl-F
        case 0x7F, 0x08:                                                              // Backspace
            if cursor > 0 {
                characters.remove(at: cursor - 1)
                cursor -= 1
            }
        case 0x0B: characters.removeSubrange(cursor...)                               // Ctrl-K
        case 0x15:                                                                    // Ctrl-U
            characters.removeSubrange(..<cursor)
            cursor = 0
        case 0x17:                                                                    // Ctrl-W
            let start = wordStart(from: cursor)
            characters.removeSubrange(start..<cursor)
            cursor = start
        case 0x10: recall(entry - 1)                                                  // Ctrl-P
        case 0x0E: recall(entry + 1)                                                  // Ctrl-N
        case 0x0C: return .clearScreen                                                // Ctrl-L
        default: break
        }
        return .editing
    }

    /// Shows history entry `index` (the line being typed is kept as the last entry).
    private mutating func recall(_ index: Int) {
        guard entries.indices.contains(index) else { return }
        entries[entry] = characters
        entry = index
        characters = entries[index]
        cursor = characters.count
    }

    private func wordStart(from position: Int) -> Int {
        var index = position
        while index > 0, characters[index - 1].isWhitespace { index -= 1 }
        while index > 0, !characters[index - 1].isWhitespace { index -= 1 }
        return index
    }

    private func wordEnd(from position: Int) -> Int {
        var index = position
        while index < characters.count, characters[index].isWhitespace { index += 1 }
        while index < characters.count, !characters[index].isWhitespace { index += 1 }
        return index
    }

    /// Rewrites the row: the prompt, the line, the rest of the row cleared, the cursor placed.
    func redraw(to output: FileDescriptor) {
        var text = "\r" + prompt + line + "\u{1B}[K\r"
        let column = prompt.count + cursor
        if column > 0 { text += "\u{1B}[\(column)C" }
        _ = try? output.writeAll(Array(text.utf8))
    }
}
