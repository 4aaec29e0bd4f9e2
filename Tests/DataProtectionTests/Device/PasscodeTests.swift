import Foundation
import SodiumBridge
import SystemPackage
import Testing
@testable import DataProtection

/// A passcode is its bytes (`Keys/key-hierarchy.md` §8.1), held in secure memory from the
/// moment it is read (issue 15).
@Suite("Passcodes as bytes")
struct PasscodeTests {
    static func device(_ root: URL) throws -> Device {
        try Device(directory: root, clock: VirtualClock(), configuration: .testing())
    }

    @Test("bytes that are not UTF-8 are a passcode of their own: no two byte sequences collapse into one")
    func nonUTF8Passcodes() throws {
        try withScratchDirectory { root in
            let device = try Self.device(root)
            try device.unlock()
            let set = Passcode(bytes: [0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0xF9, 0xF8])
            try device.setPasscode(set)
            try device.lock()
            // What a lossy decoding made of both: eight U+FFFD. Each is another passcode.
            for wrong in [Passcode(bytes: [0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87]),
                          Passcode(String(repeating: "\u{FFFD}", count: 8))] {
                expectStoreError(.incorrectPasscode) { try device.unlock(passcode: wrong) }
            }
            try device.unlock(passcode: Passcode(bytes: [0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0xF9, 0xF8]))
            #expect(device.state == .unlocked)
            // The String and byte forms of a UTF-8 passcode are the same passcode.
            try device.changePasscode(from: set, to: Passcode(bytes: Array("päss".utf8)))
            try device.lock()
            try device.unlock(passcode: "päss")
        }
    }

    @Test("a new passcode that is empty or holds a NUL byte is invalidArgument; presented, it is just wrong")
    func newPasscodeRules() throws {
        try withScratchDirectory { root in
            let device = try Self.device(root)
            try device.unlock()
            expectStoreError(.invalidArgument) { try device.setPasscode(Passcode(bytes: [])) }
            expectStoreError(.invalidArgument) { try device.setPasscode(Passcode(bytes: [0x31, 0x00, 0x32])) }
            try device.setPasscode(Passcode(bytes: [0x31, 0x32]))
            try device.lock()
            expectStoreError(.incorrectPasscode) { try device.unlock(passcode: Passcode(bytes: [0x31, 0x00, 0x32])) }
        }
    }

    @Test("reading: one trailing newline removed, the limit enforced, a terminal line stops at its newline")
    func reading() throws {
        try withScratchDirectory { (root: URL) throws in
            func read(_ bytes: [UInt8], limit: Int = 16, line: Bool = false) throws -> Passcode {
                let file = root.appendingPathComponent("p-\(UUID().uuidString)")
                try Data(bytes).write(to: file)
                let descriptor = try FileDescriptor.open(FilePath(file.path), .readOnly)
                defer { try? descriptor.close() }
                return try Passcode(reading: descriptor, limit: limit, stoppingAtNewline: line)
            }
            #expect(try read(Array("1234\n".utf8)) == Passcode("1234"))
            #expect(try read(Array("1234\r\n".utf8)) == Passcode("1234"))
            #expect(try read(Array("12\n34\n\n".utf8)) == Passcode("12\n34\n"), "only one newline")
            #expect(try read([0xFF, 0x00, 0x0A]) == Passcode(bytes: [0xFF, 0x00]))
            #expect(try read(Array("first\nsecond".utf8), line: true) == Passcode("first"))
            #expect(try read(Array(repeating: 0x31, count: 16) + [0x0D, 0x0A]).byteCount == 16, "the limit, then \\r\\n")
            for tooLong in [Array(repeating: UInt8(0x31), count: 17), Array(repeating: 0x31, count: 16) + [0x0D, 0x0A, 0x0A],
                            Array(repeating: 0x31, count: 4096)] {
                let result = outcome { try read(tooLong) }
                #expect(result.failure?.code == .invalidArgument, "\(tooLong.count) bytes: \(result)")
            }
            #expect(try read([]).byteCount == 0)
        }
    }

    @Test("an environment variable moves into a passcode: zeroed and unset in the environment")
    func environment() throws {
        let name = "DP_TEST_PASSCODE_\(UInt32.random(in: 0..<UInt32.max))"
        setenv(name, "s3cret\u{FF}", 1)
        let passcode = try #require(Passcode.takingEnvironmentVariable(name))
        #expect(passcode == Passcode("s3cret\u{FF}"))
        #expect(getenv(name) == nil)
        #expect(ProcessInfo.processInfo.environment[name] == nil)
        #expect(Passcode.takingEnvironmentVariable(name) == nil)
    }

    @Test("a passcode never shows its bytes; equality is by bytes")
    func description() {
        let passcode = Passcode("hunter2")
        #expect(passcode.description == "Passcode(7 bytes)")
        #expect("\(passcode)".contains("hunter2") == false)
        #expect(String(reflecting: passcode).contains("hunter2") == false)
        #expect(passcode == Passcode(bytes: Array("hunter2".utf8)))
        #expect(passcode != Passcode("hunter3"))
        #expect(passcode.hashValue == Passcode("x234567").hashValue, "hashes the length only")
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
