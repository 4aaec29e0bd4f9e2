import Foundation
import Testing

/// Where `dpctl` takes passcodes from, and what it refuses: passcode files that others can
/// read, that are not regular files, that are too long; a passcode is the file's bytes,
/// whatever they are (never decoded); an empty `DPCTL_PASSCODE` is no passcode at all. A
/// refused input is never an attempt.
@Suite("dpctl passcode input")
struct PasscodeInputTests {
    static func failedAttempts(_ fixture: StoreFixture) throws -> Int? {
        try fixture.run(["status", "--json"]).json()["failedAttempts"] as? Int
    }

    @Test("a passcode file others can read, a directory, a FIFO, or 4097 bytes: invalidArgument (23), no attempt counted")
    func refusedFiles() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let readable = try fixture.localFile("readable", Data("1234\n".utf8))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: readable.path)
        let directory = fixture.directory.appendingPathComponent("a-directory")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        let fifo = fixture.directory.appendingPathComponent("fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let long = try fixture.passcodeFile("long", Data(repeating: UInt8(ascii: "1"), count: 4097))
        for (file, says) in [(readable, "can be read by others"), (directory, "not a regular file"), (fifo, "not a regular file"),
                             (long, "longer than 4096 bytes")] {
            let result = try fixture.run(["unlock", "--passcode-file", file.path], passcode: nil)
            #expect(result.status == 23, "\(file.lastPathComponent): \(result.standardError)")
            #expect(result.standardError.contains(says), "\(file.lastPathComponent): \(result.standardError)")
        }
        #expect(try fixture.run(["unlock", "--passcode-file", readable.path], passcode: nil).standardError.contains("hint: chmod 600"))
        #expect(try Self.failedAttempts(fixture) == 0, "no refused input was an attempt")
        // The same file made private works; exactly 4096 bytes is allowed.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: readable.path)
        #expect(try fixture.run(["unlock", "--passcode-file", readable.path], passcode: nil).status == 0)
        let longest = try fixture.passcodeFile("longest", Data(repeating: UInt8(ascii: "1"), count: 4096))
        #expect(try fixture.run(["unlock", "--passcode-file", longest.path], passcode: nil).status == 11, "read, and wrong")
    }

    @Test("a passcode file is its bytes: \\xff..\\xf8 and \\x80..\\x87 are two passcodes, a 32-byte binary key file is one")
    func binaryPasscodeFiles() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: nil)
        let set = try fixture.passcodeFile("ff", Data([0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0xF9, 0xF8]))
        let other = try fixture.passcodeFile("80", Data([0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87]))
        let setResult = try fixture.run(["passcode", "set", "--passcode-file", set.path], passcode: nil)
        #expect(setResult.status == 0, "\(setResult.standardError)")
        // Before, both decoded lossily to eight U+FFFD: the second file unlocked the store.
        #expect(try fixture.run(["unlock", "--passcode-file", other.path], passcode: nil).status == 11)
        #expect(try fixture.run(["unlock", "--passcode-file", set.path], passcode: nil).status == 0)
        // A random key file (no NUL: a new passcode may not hold one) kept whole, all 32 bytes.
        var key = (0..<32).map { _ in UInt8.random(in: 1...255) }
        key[31] = 0x41  // not a trailing newline
        let keyFile = try fixture.passcodeFile("key", Data(key))
        let truncated = try fixture.passcodeFile("key-prefix", Data(key.prefix(31)))
        let change = try fixture.run(["passcode", "change", "--passcode-file", set.path, "--new-passcode-file", keyFile.path], passcode: nil)
        #expect(change.status == 0, "\(change.standardError)")
        #expect(try fixture.run(["unlock", "--passcode-file", truncated.path], passcode: nil).status == 11)
        #expect(try fixture.run(["unlock", "--passcode-file", keyFile.path], passcode: nil).status == 0)
    }

    @Test("only one trailing newline is removed: a passcode of two lines is kept whole, not cut at the first")
    func multiLinePasscode() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: nil)
        let file = try fixture.passcodeFile("two-lines", Data("first\nsecond\r\n".utf8))
        let set = try fixture.run(["passcode", "set", "--passcode-file", file.path], passcode: nil)
        #expect(set.status == 0, "\(set.standardError)")
        #expect(try fixture.run(["unlock"], passcode: "first").status == 11, "not cut at the first newline")
        #expect(try fixture.run(["unlock"], passcode: "first\nsecond").status == 0)
    }

    @Test("an empty DPCTL_PASSCODE is no passcode: protectedDataUnavailable (10) with a hint, and no attempt is burned")
    func emptyVariable() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let result = try fixture.run(["unlock"], passcode: "")
        #expect(result.status == 10, "\(result.standardError)")
        #expect(result.standardError.contains("hint: Set DPCTL_PASSCODE"))
        #expect(try Self.failedAttempts(fixture) == 0)
    }

    @Test("hints name the option that acts: --new-passcode-file for the new passcode, --no-passcode at init")
    func hintsNameTheRightOption() throws {
        let fixture = try StoreFixture()
        let initialize = try fixture.run(["init"], passcode: nil)
        #expect(initialize.status == 10)
        #expect(initialize.standardError.contains("or pass --no-passcode for a store without one"))
        try fixture.initialize()
        let change = try fixture.run(["passcode", "change"], passcode: "1234")
        #expect(change.status == 10)
        #expect(change.standardError.contains("Set DPCTL_NEW_PASSCODE or pass --new-passcode-file <file>."))
        let empty = try fixture.passcodeFile("empty", Data("\n".utf8))
        let set = try fixture.run(["passcode", "change", "--new-passcode-file", empty.path], passcode: "1234")
        #expect(!set.standardError.contains("removePasscode(_:) to go"))
    }
}
