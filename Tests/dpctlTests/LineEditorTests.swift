import Foundation
import Testing
@testable import dpctl

/// `dpctl shell`'s line editing: the keys, on the line state alone, then on a real terminal.
@Suite("dpctl shell: line editing")
struct LineEditorTests {
    typealias Key = LineState.Key

    static func type(_ text: String) -> [Key] { text.map { .character($0) } }
    static let enter = Key.control(0x0D)
    static let left = Key.sequence("D"), right = Key.sequence("C"), up = Key.sequence("A"), down = Key.sequence("B")

    /// Applies `keys` and returns what the line is once Enter (or an outcome other than editing) comes.
    static func edit(_ keys: [Key], history: [String] = []) -> LineState.Outcome {
        var state = LineState(prompt: "dp> ", history: history)
        for key in keys {
            let outcome = state.apply(key)
            if outcome != .editing { return outcome }
        }
        return .editing
    }

    @Test("moving and inserting: arrows, Home/End, Ctrl-A/E, words, characters beyond ASCII")
    func movingAndInserting() {
        #expect(Self.edit(Self.type("et a") + [.control(0x01)] + Self.type("g") + [Self.enter]) == .done("get a"))
        #expect(Self.edit(Self.type("get ") + [Self.left, Self.left] + Self.type("X") + [.control(0x05)] + Self.type("a") + [Self.enter])
                == .done("geXt a"))
        #expect(Self.edit(Self.type("put b") + [.sequence("H"), .sequence("F"), Self.left] + Self.type("é") + [Self.enter]) == .done("put éb"))
        #expect(Self.edit(Self.type("one two") + [.wordLeft] + Self.type("+") + [.sequence("1~"), .wordRight, .wordRight] + Self.type("!") + [Self.enter])
                == .done("one +two!"))
        #expect(Self.edit(Self.type("ab") + [Self.right, Self.right, .control(0x02)] + Self.type("-") + [Self.enter]) == .done("a-b"))
    }

    @Test("deleting: Backspace, Delete, Ctrl-D inside a line, Ctrl-K, Ctrl-U, Ctrl-W")
    func deleting() {
        #expect(Self.edit(Self.type("get X") + [.control(0x7F)] + Self.type("a") + [Self.enter]) == .done("get a"))
        #expect(Self.edit(Self.type("getX a") + [.control(0x01), .control(0x06), .control(0x06), .control(0x06), .sequence("3~"), Self.enter])
                == .done("get a"))
        #expect(Self.edit(Self.type("lockX") + [Self.left, .control(0x04), Self.enter]) == .done("lock"))
        #expect(Self.edit(Self.type("lock everything") + [.wordLeft, .control(0x0B), Self.enter]) == .done("lock "))
        #expect(Self.edit(Self.type("junk lock") + [.wordLeft, .control(0x15), Self.enter]) == .done("lock"))
        #expect(Self.edit(Self.type("unlock 9999") + [.control(0x17)] + Self.type("1234") + [Self.enter]) == .done("unlock 1234"))
        #expect(Self.edit([.control(0x7F), .sequence("3~"), .control(0x0B), Self.enter]) == .done(""), "nothing to delete")
    }

    @Test("history: up and down through earlier lines, the typed line kept; Ctrl-C abandons, Ctrl-D ends input")
    func history() {
        let history = ["unlock 1234", "get a"]
        #expect(Self.edit([Self.up, Self.enter], history: history) == .done("get a"))
        #expect(Self.edit([Self.up, Self.up, Self.up, Self.enter], history: history) == .done("unlock 1234"))
        #expect(Self.edit(Self.type("ls") + [Self.up, Self.down, Self.enter], history: history) == .done("ls"))
        #expect(Self.edit([Self.up] + Self.type(" b") + [Self.enter], history: history) == .done("get a b"))
        #expect(Self.edit([.control(0x10), .control(0x10), .control(0x0E), Self.enter], history: history) == .done("get a"))
        #expect(Self.edit(Self.type("lock") + [.control(0x03)]) == .abandoned)
        #expect(Self.edit([.control(0x04)]) == .done(nil))
        #expect(Self.edit([.control(0x0C)]) == .clearScreen)
    }

    @Test("on a terminal (a pseudo-terminal through script(1)): keys edit the line, history recalls it, Ctrl-D ends the session",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func onATerminal() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-q", "-e", "-c", "'\(DPCtlRunner.executable.path)' shell", "/dev/null"]
        process.environment = ProcessInfo.processInfo.environment.merging(["TERM": "xterm"]) { $1 }
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // Keys are typed once the first prompt shows (the terminal is raw from then on).
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("dp> ") {
            let piece = output.fileHandleForReading.availableData
            if piece.isEmpty { break }
            seen.append(piece)
        }
        // An unlock and a put; "get X", Backspace, "a"; Up (that get again); "et a", Ctrl-A, "g"; Ctrl-D.
        let keys = "unlock\r" + "put a \"hello\"\r" + "get X\u{7F}a\r" + "\u{1B}[A\r" + "et a\u{01}g\r" + "\u{04}"
        try input.fileHandleForWriting.write(contentsOf: Data(keys.utf8))
        seen.append(output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        try input.fileHandleForWriting.close()
        let transcript = String(decoding: seen, as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(transcript.debugDescription)")
        // Three gets of a, each printing the content: the edited one, the recalled one, the Ctrl-A one.
        #expect(transcript.components(separatedBy: "\"hello\"\r\n").count - 1 == 3, "\(transcript.debugDescription)")
        #expect(!transcript.contains("syntax error"), "\(transcript.debugDescription)")
    }
}
