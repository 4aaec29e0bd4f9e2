import DataProtectionScenarios
import Testing

extension Timeline {
    /// Runs the timeline; if a step fails, records one Swift Testing issue at that
    /// step's call (its `#fileID`, `#filePath`, `#line`, `#column`), saying what was
    /// expected and what happened. Returns the result for further checks.
    ///
    /// Outside a running test, the issue has nowhere to go and is dropped.
    @discardableResult
    public func assertPasses(using runner: ScenarioRunner = ScenarioRunner()) -> ScenarioResult {
        let result = run(using: runner)
        if let failure = result.failure {
            let location = failure.location
            Issue.record(
                Comment(rawValue: "\(scenario.title): \(failure.message)"),
                sourceLocation: SourceLocation(fileID: location.file, filePath: location.filePath ?? location.file,
                                               line: max(location.line, 1), column: max(location.column, 1)))
        }
        return result
    }
}
