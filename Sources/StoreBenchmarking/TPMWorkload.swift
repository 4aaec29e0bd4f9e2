import DataProtection
import Foundation
import TPMBridge

/// Unlock with the device key in a TPM (a software TPM, swtpm, started for the run) against
/// the file device key, both with the cheapest Argon2id so that what differs is the TPM; and
/// the TPM commands one unlock sends (`dpctl bench --tpm`).
package struct TPMWorkload: Sendable {
    /// Unlocks timed on each side (alternating; medians reported).
    package var unlocks: Int

    package init(unlocks: Int = 20) {
        self.unlocks = unlocks
    }

    /// The rows; one saying why when swtpm is not installed.
    package func run(in parent: URL?, progress: @Sendable (String) -> Void) throws -> [BenchRow] {
        guard SoftwareTPM.isInstalled else {
            return [BenchRow(what: "unlock, TPM device key", store: "-", baseline: "-", ratio: nil, target: "-", met: nil,
                             note: "skipped: swtpm is not installed (Debian: swtpm swtpm-tools)")]
        }
        progress("unlock with a TPM device key (swtpm) and with the file device key")
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        var configuration = BenchScratch.cheapConfiguration
        configuration.deviceKeyKind = .tpm
        configuration.tpmTCTI = tpm.tcti
        let onTPM = try BenchScratch(configuration: configuration, passcode: "1234", in: parent)
        defer { onTPM.remove() }
        let onFile = try BenchScratch(passcode: "1234", in: parent)
        defer { onFile.remove() }
        var tpmTimes: [Duration] = [], fileTimes: [Duration] = [], commands: [Int] = []
        // One unlock each first: the passcode object is loaded once per process, not per unlock.
        _ = try LockWorkload.unlock(onTPM.store.device, passcode: "1234")
        _ = try LockWorkload.unlock(onFile.store.device, passcode: "1234")
        for _ in 0..<unlocks {
            let before = onTPM.store.device.tpmCommandCount ?? 0
            tpmTimes.append(try LockWorkload.unlock(onTPM.store.device, passcode: "1234").unlock)
            commands.append((onTPM.store.device.tpmCommandCount ?? 0) - before)
            fileTimes.append(try LockWorkload.unlock(onFile.store.device, passcode: "1234").unlock)
        }
        let tpmMedian = median(tpmTimes), fileMedian = median(fileTimes)
        let perUnlock = commands.sorted()[commands.count / 2]
        return [
            BenchRow(what: "unlock, TPM device key (swtpm)", store: StoreBench.milli(tpmMedian),
                     baseline: "\(StoreBench.milli(fileMedian)) file device key", ratio: tpmMedian.seconds / fileMedian.seconds,
                     target: "-", met: nil, note: "cost ratio; cheapest Argon2id on both sides"),
            BenchRow(what: "TPM commands per unlock", store: "\(perUnlock)", baseline: "-", ratio: nil, target: "2 (the minimum)",
                     met: perUnlock <= 2,
                     note: "1 HMAC of the passcode object + 1 NV increment binding the pending attempt; the reset to 0 is bound to the same counter value (key-hierarchy.md §4.4.4, §4.4.6)"),
        ]
    }
}
