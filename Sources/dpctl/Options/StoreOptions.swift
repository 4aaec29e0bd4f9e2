import ArgumentParser
import DataProtection
import DataProtectionScenarios
import Foundation

/// Options shared by the store commands: where the store is, and how long to wait for it.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp(
        "The store directory (default: $DPCTL_STORE, else $XDG_DATA_HOME/dpctl or ~/.local/share/dpctl).",
        valueName: "dir"))
    var store: String?

    @Option(name: .customLong("device"), help: ArgumentHelp(
        "The device directory, kept apart from the data (default: $DPCTL_DEVICE, else $XDG_STATE_HOME/dpctl/<store id> or ~/.local/state/dpctl/<store id>).",
        valueName: "dir"))
    var device: String?

    @Option(name: .customLong("wait"), help: ArgumentHelp(
        "How long to wait while another process owns the store, e.g. 500ms, 30s, 2m; 0s fails at once (storeBusy, exit 25).",
        valueName: "duration"))
    var wait = WaitDuration(duration: .seconds(30))

    /// The store directory: `--store`, else `DPCTL_STORE`, else the per-user default under the XDG data directory.
    var directory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let store, !store.isEmpty { return URL(fileURLWithPath: store) }
        if let store = environment["DPCTL_STORE"], !store.isEmpty { return URL(fileURLWithPath: store) }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return URL(fileURLWithPath: data).appendingPathComponent("dpctl")
        }
        return FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent(".local/share/dpctl")
    }
}

/// A `--wait` value: a duration in the scenario language's spelling (`500ms`, `30s`, `2m`).
struct WaitDuration: ExpressibleByArgument {
    let duration: Duration

    init(duration: Duration) {
        self.duration = duration
    }

    init?(argument: String) {
        guard let duration = Duration(scenarioSpelling: argument) else { return nil }
        self.duration = duration
    }

    var defaultValueDescription: String { duration.scenarioSpelling }
}

/// `--passcode-file` for the commands that may need the passcode (others do not offer it).
struct PasscodeOptions: ParsableArguments {
    @Option(name: .customLong("passcode-file"), help: ArgumentHelp(
        "Read the passcode from this file (its bytes, less one trailing newline). Else $DPCTL_PASSCODE, else a no-echo prompt on a terminal.",
        valueName: "file"))
    var passcodeFile: String?
}

/// `--json` for the commands that print results.
struct OutputOptions: ParsableArguments {
    @Flag(name: .customLong("json"), help: "Print the result as a JSON object (sorted keys).")
    var json = false
}

/// `--quiet` for the commands that move data.
struct ProgressOptions: ParsableArguments {
    @Flag(name: .customLong("quiet"), help: "No progress bar (it is shown only when standard error is a terminal).")
    var quiet = false
}

extension ProtectionClass: ExpressibleByArgument {}
