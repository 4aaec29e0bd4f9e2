import Foundation

/// The steps of the TPM device's write protocols (`Keys/key-hierarchy.md` §4.4.4, §4.4.3)
/// where a crash leaves the device directory and the TPM between two writes: a test hook.
///
/// Only tests set it, through the environment of a `dpctl` (or any) process:
/// `DPCTL_TEST_TPM_CRASH=<point>` ends the process with `SIGKILL` when it reaches the point
/// (deterministic crash injection); `DPCTL_TEST_TPM_PAUSE=<point>` makes it create the file
/// named by `DPCTL_TEST_TPM_PAUSE_FILE` there and sleep for a second, so that a kill harness
/// can land its `SIGKILL` inside the window. Unset (always, outside tests), reaching a point
/// costs one comparison.
enum TPMCrashPoint: String, Sendable, CaseIterable {
    /// The attempt counter file for value c+1 is written (durably); the TPM counter is still c.
    case attemptsWritten
    /// The TPM counter is advanced to c+1; the verdict of the attempt is not written yet.
    case counterAdvanced
    /// A rotation wrote the new effaceable key into the free NV slot; the keybag is the old one.
    case rotationSlotWritten
    /// The new keybag (sealed under the new slot's key) is written; the old slot is not wiped yet.
    case keybagWritten

    private static let hook: (crash: TPMCrashPoint?, pause: TPMCrashPoint?, pauseFile: String?) = {
        let environment = ProcessInfo.processInfo.environment
        return (environment["DPCTL_TEST_TPM_CRASH"].flatMap(TPMCrashPoint.init(rawValue:)),
                environment["DPCTL_TEST_TPM_PAUSE"].flatMap(TPMCrashPoint.init(rawValue:)),
                environment["DPCTL_TEST_TPM_PAUSE_FILE"])
    }()

    /// Called when the protocol reaches `point`.
    static func reach(_ point: TPMCrashPoint) {
        let hook = Self.hook
        guard hook.crash != nil || hook.pause != nil else { return }
        if hook.pause == point {
            if let file = hook.pauseFile { _ = FileManager.default.createFile(atPath: file, contents: Data(point.rawValue.utf8)) }
            usleep(1_000_000)
        }
        if hook.crash == point { kill(getpid(), SIGKILL) }
    }
}
