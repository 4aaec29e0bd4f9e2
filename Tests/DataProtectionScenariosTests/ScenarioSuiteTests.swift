import DataProtectionScenarios
import Foundation
import Testing

/// The project's behaviour tests: every `Tests/Scenarios/*.scenario` file.
@Suite("Scenario suite")
struct ScenarioSuiteTests {
    @Test("every scenario in Tests/Scenarios passes")
    func everyScenarioPasses() throws {
        let directory = Support.scenariosDirectory.path
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".scenario") }
        try #require(files.count >= 20, "scenario files missing from \(directory)")
        let report = Support.runner.run(paths: [directory])
        #expect(report.passed >= 250, "fewer scenarios than expected: \(report.passed) passed")
        let failures = report.failures.map(\.summary)
        #expect(failures.isEmpty, "failing scenarios:\n\(failures.joined(separator: "\n"))")
    }

    @Test("the spec's example is in the suite verbatim")
    func specExampleIsVerbatim() throws {
        let example = try String(contentsOf: Support.scenariosDirectory.appendingPathComponent("spec-example.scenario"), encoding: .utf8)
        // shared/spec lies beside the repository (in CI and in the work tree) when it is there at all.
        let candidates = [Support.packageRoot.deletingLastPathComponent().appendingPathComponent("shared/spec/scenario-language.md")]
        guard let spec = candidates.lazy.compactMap({ try? String(contentsOf: $0, encoding: .utf8) }).first else { return }
        let afterHeading = try #require(spec.range(of: "## Example")).upperBound
        let open = try #require(spec.range(of: "```\n", range: afterHeading..<spec.endIndex))
        let close = try #require(spec.range(of: "```", range: open.upperBound..<spec.endIndex))
        let block = String(spec[open.upperBound..<close.lowerBound])
        #expect(example.contains(block), "Tests/Scenarios/spec-example.scenario no longer holds the spec's example verbatim")
    }
}
