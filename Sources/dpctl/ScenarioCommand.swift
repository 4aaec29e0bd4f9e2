import ArgumentParser
import DataProtectionScenarios
import Foundation

/// `dpctl scenario`: scenario files (see `scenario-language.md`).
struct Scenario: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run scenario files: scripted lock/unlock timelines with expected results.",
        subcommands: [Run.self]
    )
}

extension Scenario {
    /// `dpctl scenario run <file-or-directory>... [--json]`.
    ///
    /// Exit status: 0 when every scenario passed; 1 when any failed (a scenario with a
    /// syntax error, or a path that is not a readable file or directory, counts as
    /// one failure); 64 for a usage error (from the argument parser).
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run every scenario in the given .scenario files and directories.",
            discussion: """
                Each scenario runs on a fresh simulated device and store in a temporary \
                directory, on a virtual clock starting at 0. Prints one line per scenario \
                (PASS <title>, or FAIL <title> (<file>:<line>): <expected>, <got>), then \
                `<N> passed, <M> failed`. Exits 0 only if nothing failed, 1 otherwise.
                """
        )

        @Argument(help: "Scenario files, or directories searched recursively for *.scenario.")
        var paths: [String]

        @Flag(help: "Print the report as JSON.")
        var json = false

        @Option(help: "How many scenarios to run at once (default: one per processor).")
        var jobs: Int?

        func validate() throws {
            guard !paths.isEmpty else { throw ValidationError("Give at least one scenario file or directory.") }
            if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1.") }
        }

        func run() throws {
            var runner = ScenarioRunner()
            if let jobs { runner.parallelism = jobs }
            let report = runner.run(paths: paths)
            if json {
                FileHandle.standardOutput.write(report.json() + Data("\n".utf8))
            } else {
                print(report.text, terminator: "")
            }
            // Scenario failures are results, not errors: a distinct status, nothing on stderr.
            if !report.succeeded { throw ExitCode(1) }
        }
    }
}
