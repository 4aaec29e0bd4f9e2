import DataProtectionScenarios
import Foundation

/// Locations and runners shared by the scenario tests.
enum Support {
    /// The package root: walk up from this file until `Package.swift`.
    static let packageRoot: URL = {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) { return directory }
            directory.deleteLastPathComponent()
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// `Tests/Scenarios`.
    static var scenariosDirectory: URL { packageRoot.appendingPathComponent("Tests/Scenarios") }

    /// A runner for tests: scenario directories on a RAM disk when there is one (the
    /// library simulates crashes itself, so real fsyncs only cost time), several at once.
    static var runner: ScenarioRunner {
        let shm = URL(fileURLWithPath: "/dev/shm")
        var isDirectory: ObjCBool = false
        let onRAM = FileManager.default.fileExists(atPath: shm.path, isDirectory: &isDirectory) && isDirectory.boolValue
            && FileManager.default.isWritableFile(atPath: shm.path)
        return ScenarioRunner(temporaryDirectory: onRAM ? shm : FileManager.default.temporaryDirectory,
                              parallelism: max(4, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// Runs scenario text as the file `file`.
    static func run(_ text: String, file: String = "test.scenario") -> ScenarioReport {
        runner.run(contents: Data(text.utf8), file: file)
    }
}
