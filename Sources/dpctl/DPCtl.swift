import ArgumentParser
import DataProtection
import Foundation
import Logging

/// `dpctl`: try Data Protection from the terminal.
@main
struct DPCtl: ParsableCommand {
    /// Library log lines go to standard error, warnings and worse only:
    /// standard output carries results (file contents, JSON).
    static func main() {
        #if DP_LIBFUZZER
        ArgumentFuzzing.runLibFuzzer()  // a fuzz build (`.ci/fuzz`): libFuzzer drives `ArgumentFuzzing.check`
        #endif
        // The passcode variables go into secure memory and out of the environment before anything
        // copies the environment into `String`s or a child process inherits it.
        PasscodeInput.captureEnvironment()
        // A reader that goes away (`dpctl cat big | head`) is a write error (EPIPE) to end on quietly, not a signal.
        signal(SIGPIPE, SIG_IGN)
        // Before any key or plaintext is touched: no core dump, no ptrace or /proc/<pid>/mem for this
        // user's other processes. Not for `bench`, whose peak-memory row resets the process's own
        // /proc counters (which a non-dumpable process of an ordinary user may not write).
        if CommandLine.arguments.dropFirst().first != "bench" {
            do {
                try ProcessProtection.makeNonDumpable()
            } catch {
                FileHandle.standardError.write("dpctl: warning: \(error.message)\n")
            }
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        main(nil)
    }

    static let configuration = CommandConfiguration(
        commandName: "dpctl",
        abstract: "iOS-style Data Protection for any program: a simulated device with protection classes.",
        discussion: "Run `dpctl demo` for a narrated tour.",
        version: "0.3.0",
        subcommands: [
            Init.self, Status.self, Unlock.self, Lock.self, Watch.self, AgentCommand.self, Put.self, Get.self, Cat.self, List.self, Stat.self,
            MakeDirectory.self, Remove.self, Move.self, Copy.self, SetClass.self, SQL.self, PasscodeCommand.self, Erase.self,
            ItemCommand.self, Demo.self, Scenario.self, Shell.self, Bench.self,
        ]
    )
}

/// Exit statuses, one per kind of failure (documented in the README).
enum ExitStatus {
    static func code(for error: DataProtectionError.Code) -> Int32 {
        switch error {
        case .protectedDataUnavailable: 10
        case .incorrectPasscode: 11
        case .passcodeAttemptsDelayed: 12
        case .deviceErased: 13
        case .fileNotFound: 14
        case .fileExists: 15
        case .notADirectory: 16
        case .isADirectory: 17
        case .directoryNotEmpty: 18
        case .handleClosed: 19
        case .notPermitted: 20
        case .integrityFailure: 21
        case .invalidPath: 22
        case .invalidArgument: 23
        case .ioFailure: 24
        case .storeBusy: 25
        case .sqliteError: 26
        }
    }
}

extension DataProtectionError {
    /// Prints `dpctl: error: … (code)` and `dpctl: hint: …` to standard error and
    /// returns the exit code for the error's kind.
    func reportAndExit() -> ExitCode {
        var standardError = FileHandle.standardError
        print("dpctl: error: \(message) (\(code.rawValue))", to: &standardError)
        if code == .protectedDataUnavailable && Session.throughAgent {
            print("dpctl: hint: The agent's device is locked for this class: run `dpctl unlock`.", to: &standardError)
        } else if let hint {
            print("dpctl: hint: \(hint)", to: &standardError)
        }
        return ExitCode(ExitStatus.code(for: code))
    }
}

extension FileHandle: @retroactive TextOutputStream {
    public func write(_ string: String) {
        write(Data(string.utf8))
    }
}
