import DataProtection
import Foundation

/// Where `dpctl sql` reads lines: the statement argument, standard input (a pipe or a file,
/// read as it comes), a file of `.read`, or a terminal (``SQLPrompt``).
final class SQLLineInput {
    private enum Source {
        case prompt(SQLPrompt)
        case handle(FileHandle, closeAtEnd: Bool)
        case text
    }

    private let source: Source
    /// Bytes read and not yet handed out as lines.
    private var buffer: [UInt8] = []
    private var position = 0
    private var ended = false
    /// A line given back (``putBack(_:)``), handed out first.
    private var returned: String?

    private init(_ source: Source, buffer: [UInt8] = [], ended: Bool = false) {
        self.source = source
        self.buffer = buffer
        self.ended = ended
    }

    /// The lines of `text` (a statement argument).
    static func text(_ text: String) -> SQLLineInput { SQLLineInput(.text, buffer: Array(text.utf8), ended: true) }

    /// The lines of `handle` as they come (closed at the end when `closeAtEnd`).
    static func handle(_ handle: FileHandle, closeAtEnd: Bool) -> SQLLineInput { SQLLineInput(.handle(handle, closeAtEnd: closeAtEnd)) }

    /// The lines typed at `prompt`.
    static func prompt(_ prompt: SQLPrompt) -> SQLLineInput { SQLLineInput(.prompt(prompt)) }

    /// Whether a whole line is at hand, to be taken without waiting for a read.
    var hasBufferedLine: Bool { returned != nil || nextNewline() != nil || (ended && position < buffer.count) }

    /// Where the next newline is in the buffer, if it holds one (searched with memchr(3): a
    /// loop over the bytes costs ten instructions each).
    private func nextNewline() -> Int? {
        guard position < buffer.count else { return nil }
        return buffer.withUnsafeBytes { bytes in
            memchr(bytes.baseAddress! + position, 0x0A, bytes.count - position).map { UnsafeRawPointer($0) - bytes.baseAddress! }
        }
    }

    /// The next line, with its newline (one is added to a last line without it); `nil` at the end.
    /// `continuing`: inside a statement (the prompt shows `...> `).
    func nextLine(continuing: Bool) throws(DataProtectionError) -> String? {
        if let returned {
            self.returned = nil
            return returned
        }
        if case .prompt(let prompt) = source {
            return prompt.nextLine(continuing: continuing).map { $0 + "\n" }
        }
        while true {
            if let newline = nextNewline() {
                defer { position = newline + 1 }
                return try Self.text(buffer[position...newline])
            }
            if ended {
                guard position < buffer.count else { return nil }
                defer { position = buffer.count }
                return try Self.text(buffer[position...]) + "\n"
            }
            guard case .handle(let handle, let closeAtEnd) = source else { return nil }
            buffer.removeFirst(position)
            position = 0
            let read = handle.availableData
            if read.isEmpty {
                ended = true
                if closeAtEnd { try? handle.close() }
            }
            buffer.append(contentsOf: read)
        }
    }

    /// Gives `line` back: the next ``nextLine(continuing:)`` returns it.
    func putBack(_ line: String) {
        returned = line
    }

    private static func text(_ bytes: ArraySlice<UInt8>) throws(DataProtectionError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw DataProtectionError(.invalidArgument, "The SQL read is not UTF-8.")
        }
        return text
    }
}
