import Foundation
import TestSupport
import Testing

/// The DocC catalogs build for every product without a warning (`--warnings-as-errors`):
/// an ambiguous or broken symbol link fails the test. It builds the package once more, in a
/// scratch directory of its own (the test run holds `.build`), at the lowest CPU priority.
@Suite("Documentation build")
struct DocumentationBuildTests {
    static let products = ["DataProtection", "DataProtectionSQLite", "DataProtectionGRDB", "DataProtectionAgent",
                           "DataProtectionBackup", "DataProtectionScenarios", "DataProtectionScenarioTesting"]

    static var swift: URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent("swift") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    @Test("generate-documentation for every product, with warnings as errors",
          .enabled(if: swift != nil, "no swift on the PATH"), .timeLimit(.minutes(20)))
    func everyCatalogBuildsWithoutWarnings() throws {
        let scratch = try TemporaryDirectory()
        var arguments = ["package", "--package-path", ReadmeTests.root.path, "--scratch-path", scratch.url.path,
                         "--disable-sandbox", "generate-documentation", "--warnings-as-errors"]
        for product in Self.products { arguments += ["--target", product] }
        var environment = ProcessInfo.processInfo.environment
        for name in environment.keys where name.hasPrefix("SWIFTPM_") || name.hasPrefix("XCTest") { environment[name] = nil }
        // At the lowest priority: the suite's tests that wait for something within a bound
        // run beside this build.
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/nice"), ["-n", "19", Self.swift!.path] + arguments,
                                     fullEnvironment: environment)
        let diagnostics = (result.standardOutput + result.standardError).split(separator: "\n")
            .filter { $0.hasPrefix("error:") || $0.hasPrefix("warning:") || $0.hasPrefix("  -->") }
        #expect(result.status == 0, "generate-documentation failed (\(result.status)):\n\(diagnostics.joined(separator: "\n"))")
        for product in Self.products {
            let archive = scratch.url.appendingPathComponent("plugins/Swift-DocC/outputs/\(product).doccarchive")
            #expect(FileManager.default.fileExists(atPath: archive.path), "no archive for \(product)")
        }
    }
}
