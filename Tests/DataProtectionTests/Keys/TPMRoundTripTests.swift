import Foundation
import SodiumBridge
import SystemPackage
import Testing
import TPMBridge
@testable import DataProtection

/// The TPM commands (round trips) of a TPM device, counted by ``TPMContext`` (every command
/// sent): an unlock in a process that holds the device (the agent), an unlock from a cold
/// process (`dpctl unlock`: boot, unlock, exit), a passcode change, and file reads, which
/// send none (`Keys/key-hierarchy.md` §4.4.6). Exact: a change that adds a command fails here.
@Suite("TPM round trips", .serialized, .enabled(if: SoftwareTPM.isInstalled, "swtpm is not installed (Debian: swtpm swtpm-tools); CI installs it"))
struct TPMRoundTripTests {
    /// The TPM commands `body` sends through `context` (per connection: other suites run
    /// TPM tests in this process at the same time).
    static func commands(_ context: TPMContext?, _ body: () throws -> Void) rethrows -> Int {
        let before = context?.commandCount ?? 0
        try body()
        return (context?.commandCount ?? 0) - before
    }

    @Test("commands per unlock (warm 2, cold process 17), per wrong passcode (5), per passcode change (9), per file read (0)")
    func counted() throws {
        let tpm = try SoftwareTPM()
        try withScratchDirectory { root in
            let directory = root.appendingPathComponent("device")
            let files = root.appendingPathComponent("files")
            do {
                let device = try Device(creatingAt: directory, passcode: "1234", clock: VirtualClock(),
                                        configuration: TPMDeviceKeyTests.configuration(tpm))
                try device.unlock(passcode: "1234")
                let store = try ProtectedStore(directory: files, device: device)
                try store.write(Data("plain".utf8), to: "plain.txt", protection: .none)
                try store.write(Data("secret".utf8), to: "secret.txt", protection: .complete)
            }
            // A cold process (dpctl unlock): boot, one unlock, exit.
            var device: Device?
            // Boot: NV_ReadPublic + NV_Read of the effaceable index; StartAuthSession, CreatePrimary (the SRK),
            // Load (the device key); HMAC for K_seal, K_counter and K_device; NV_ReadPublic + NV_Read of the counter.
            device = try Device(directory: directory, clock: VirtualClock(), configuration: DeviceConfiguration.testing(tpmTCTI: tpm.tcti))
            // The device's TPM connection, kept to count the flushes of its close after the device is gone.
            let context = try #require(device?.hierarchy.deviceKey as? TPMDeviceKey).context
            let boot = context.commandCount
            #expect(boot == 10)
            // The first unlock of a process: NV_Increment (the pending attempt), Load + HMAC (the passcode object);
            // the reset to 0 after it is bound to the same counter value: no second increment.
            let coldUnlock = try Self.commands(context) { try device?.unlock(passcode: "1234") }
            #expect(coldUnlock == 3)
            var store: ProtectedStore? = try ProtectedStore(directory: files, device: try #require(device))
            let reads = try Self.commands(context) {
                for _ in 0..<5 {
                    #expect(try store?.contents(atPath: "secret.txt") == Data("secret".utf8))
                    #expect(try store?.contents(atPath: "plain.txt") == Data("plain".utf8))
                }
                try store?.write(Data("more".utf8), to: "more.txt", protection: .completeUntilFirstUserAuthentication)
            }
            #expect(reads == 0, "file I/O must not reach the TPM")
            // An unlock in a process that holds the device (the agent): NV_Increment and the passcode object's HMAC.
            try device?.lock()
            let warmUnlock = try Self.commands(context) { try device?.unlock(passcode: "1234") }
            #expect(warmUnlock == 2)
            // A wrong passcode: NV_Increment, the refused HMAC of the passcode object, three HMACs with the device
            // key (the wrong key's stand-in and the fingerprints); its verdict is bound without a second increment.
            let wrong = Self.commands(context) { #expect(TPMDeviceKeyTests.code { try device?.unlock(passcode: "9999") } == .incorrectPasscode) }
            #expect(wrong == 5)
            try device?.unlock(passcode: "1234")
            // A passcode change: the old passcode checked (2), the old passcode object flushed (1), Create + Load + HMAC
            // of the new one (3), K_seal of the new effaceable key (1), NV_Write of the new slot and of zeros over the old (2).
            let change = try Self.commands(context) { try device?.changePasscode(from: "1234", to: "5678") }
            #expect(change == 9)
            // Exit: the session, the SRK, the device key and the passcode object flushed.
            store = nil
            let exit = Self.commands(context) { device = nil }
            #expect(exit == 4)
            #expect(boot + coldUnlock + exit == 17)
        }
    }
}
