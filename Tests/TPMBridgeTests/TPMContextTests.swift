import Foundation
import SodiumBridge
import Testing
@testable import TPMBridge

/// The TPM bridge against swtpm: HMAC keys that only their TPM can use, auth values that
/// count in the dictionary-attack counter, lockout with the recovery time, NV storage and
/// counters, and a TPM that cannot be reached.
@Suite("TPM bridge", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMContextTests {
    static func message(_ text: String) -> SecureBytes { SecureBytes(copyingUTF8: text) }

    /// One HMAC under `key` with `auth`: its error, `nil` if it succeeded.
    static func attempt(_ context: TPMContext, _ key: TPMKeyBlobs, _ auth: SecureBytes?) -> TPMError? {
        do {
            _ = try context.hmac(key: key, authValue: auth, message: message("m"))
            return nil
        } catch {
            return error
        }
    }

    /// Opening a context: its error, `nil` if it opened.
    static func open(_ tcti: String) -> TPMError? {
        do {
            try TPMContext(tcti: tcti).close()
            return nil
        } catch {
            return error
        }
    }

    @Test("an HMAC key is deterministic in its TPM, differs per key, and does not load in another TPM")
    func hmacKeys() throws {
        let tpm = try SoftwareTPM()
        let context = try TPMContext(tcti: tpm.tcti)
        let key = try context.createHMACKey(authValue: nil)
        let first = try context.hmac(key: key, authValue: nil, message: Self.message("abc"))
        let again = try context.hmac(key: key, authValue: nil, message: Self.message("abc"), keepLoaded: false)
        #expect(first.constantTimeEquals(again))
        #expect(!first.constantTimeEquals(try context.hmac(key: key, authValue: nil, message: Self.message("abd"))))
        let other = try context.createHMACKey(authValue: nil)
        #expect(!first.constantTimeEquals(try context.hmac(key: other, authValue: nil, message: Self.message("abc"))))
        context.close()

        let elsewhere = try SoftwareTPM()
        let foreign = try TPMContext(tcti: elsewhere.tcti)
        #expect(throws: TPMError.self) { try foreign.hmac(key: key, authValue: nil, message: Self.message("abc")) }
        guard case .foreignObject = Self.attempt(foreign, key, nil) else {
            Issue.record("another TPM's key was not refused as foreign")
            return
        }
    }

    @Test("wrong auth values fail, count in the dictionary-attack counter, and lock the TPM with its recovery time")
    func lockout() throws {
        let tpm = try SoftwareTPM()
        let set = try tpm.runTool("tpm2_dictionarylockout", ["-s", "-n", "3", "-t", "7", "-l", "60"])
        #expect(set.status == 0, "\(set.output)")
        let context = try TPMContext(tcti: tpm.tcti)
        let right = SecureBytes(copyingUTF8: "right auth value")
        let key = try context.createHMACKey(authValue: right)
        _ = try context.hmac(key: key, authValue: right, message: Self.message("m"))
        var failures = 0
        var recovery: UInt32?
        for _ in 0..<6 {
            switch Self.attempt(context, key, SecureBytes(copyingUTF8: "wrong")) {
            case .authorizationFailed: failures += 1
            case .lockout(let seconds): recovery = seconds
            case let other: Issue.record("a wrong auth value gave \(String(describing: other))")
            }
            if recovery != nil { break }
        }
        #expect(failures == 3)
        #expect(recovery == 7)
        // Locked out: even the right value is refused until the TPM recovers.
        #expect(throws: TPMError.lockout(recoverySeconds: 7)) {
            try context.hmac(key: key, authValue: right, message: Self.message("m"))
        }
    }

    @Test("NV storage is written in place and removed; a counter only goes up")
    func nvStorage() throws {
        let tpm = try SoftwareTPM()
        let context = try TPMContext(tcti: tpm.tcti)
        let index: UInt32 = 0x0180_1234
        try context.defineIndex(index, size: 64, counter: false)
        #expect(throws: TPMError.indexDefined) { try context.defineIndex(index, size: 64, counter: false) }
        try context.writeIndex(index, SecureBytes(count: 64), at: 0)
        try context.writeIndex(index, SecureBytes(copyingUTF8: String(repeating: "k", count: 32)), at: 32)
        let read = try context.readIndex(index, count: 64)
        #expect(read.withUnsafeBytes { Array($0) } == Array(repeating: 0, count: 32) + Array("kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk".utf8))
        try context.undefineIndex(index)
        #expect(throws: TPMError.indexMissing) { try context.readIndex(index, count: 64) }
        try context.undefineIndex(index)  // nothing to do

        let counter: UInt32 = 0x0180_1235
        try context.defineIndex(counter, size: 8, counter: true)
        try context.incrementCounter(counter)
        let first = try context.readCounter(counter)
        try context.incrementCounter(counter)
        #expect(try context.readCounter(counter) == first + 1)
    }

    @Test("a TPM that cannot be reached is unreachable, not another failure")
    func unreachable() throws {
        for tcti in ["swtpm:host=127.0.0.1,port=1", "device:/nonexistent/tpmrm0"] {
            guard case .unreachable = Self.open(tcti) else {
                Issue.record("\(tcti): not unreachable")
                continue
            }
        }
    }

    @Test("objects and policy sessions left by a process that never flushed them are flushed when the TPM has no room")
    func transientExhaustion() throws {
        let tpm = try SoftwareTPM()
        let key = try TPMContext(tcti: tpm.tcti).createHMACKey(authValue: nil)
        // Contexts dropped without closing leak their objects and their policy session into a TPM without a
        // resource manager (swtpm holds three of each): the fifth context has to flush both kinds.
        var leaked: [TPMContext] = []
        for _ in 0..<4 {
            let context = try TPMContext(tcti: tpm.tcti)
            _ = try context.hmac(key: key, authValue: nil, message: Self.message("m"))
            leaked.append(context)
        }
        let fresh = try TPMContext(tcti: tpm.tcti)
        _ = try fresh.hmac(key: key, authValue: nil, message: Self.message("m"))
        withExtendedLifetime(leaked) {}
    }
}
