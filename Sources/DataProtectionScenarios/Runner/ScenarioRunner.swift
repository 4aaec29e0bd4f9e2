import DataProtection
import Foundation

/// Runs scenarios: each on a fresh device and store in a temporary directory of
/// its own (removed afterwards), on a virtual clock starting at 0. A scenario stops
/// at its first failing step; the others still run.
public struct ScenarioRunner: Sendable {
    /// Where each scenario's temporary directory is made.
    public var temporaryDirectory: URL
    /// How many scenarios may run at once (each has its own device, store and clock).
    public var parallelism: Int

    /// A runner that makes its directories under `temporaryDirectory` and runs up to `parallelism` scenarios at once.
    public init(
        temporaryDirectory: URL = FileManager.default.temporaryDirectory,
        parallelism: Int = ProcessInfo.processInfo.activeProcessorCount
    ) {
        self.temporaryDirectory = temporaryDirectory
        self.parallelism = max(1, parallelism)
    }

    /// Runs one scenario.
    public func run(_ scenario: Scenario) -> ScenarioResult {
        ScenarioSession(scenario: scenario, in: temporaryDirectory).run()
    }

    /// Runs `scenarios`, reporting in their order.
    public func run(_ scenarios: [Scenario]) -> ScenarioReport {
        ScenarioReport(results: runAll(scenarios.map { .scenario($0) }))
    }

    /// Parses and runs the scenarios of one file's `contents` (`file` names it in reports).
    /// A syntax error fails its scenario, which does not run, and no other (scenario-language.md,
    /// "Rulings (1.1)"); one before the first scenario, or a file without any, fails the file.
    public func run(contents: Data, file: String) -> ScenarioReport {
        ScenarioReport(results: runAll(Self.load(contents: contents, file: file)))
    }

    /// Runs every scenario of the given `.scenario` files and directories (searched
    /// recursively for `*.scenario`, in path order), in the order given.
    public func run(paths: [String]) -> ScenarioReport {
        ScenarioReport(results: runAll(paths.flatMap(Self.load(path:))))
    }

    // MARK: - Loading

    /// A scenario to run, or a result already known (a file that cannot run).
    enum Job: Sendable {
        case scenario(Scenario)
        case known(ScenarioResult)
    }

    static func load(contents: Data, file: String) -> [Job] {
        ScenarioParser.scenarios(in: contents, file: file).map { parsed in
            switch parsed {
            case .scenario(let scenario): .scenario(scenario)
            case .malformed(let title, let location, let error): .known(.syntaxError(error, title: title, location: location))
            }
        }
    }

    static func load(path: String) -> [Job] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return [unreadable(path, "no such file or directory")]
        }
        guard isDirectory.boolValue else {
            guard let contents = FileManager.default.contents(atPath: path) else { return [unreadable(path, "an unreadable file")] }
            return load(contents: contents, file: path)
        }
        let files = scenarioFiles(in: path)
        guard !files.isEmpty else { return [unreadable(path, "a directory without .scenario files")] }
        return files.flatMap(load(path:))
    }

    /// The `.scenario` files under `directory`, sorted, named as `directory/relative/path`.
    static func scenarioFiles(in directory: String) -> [String] {
        let base = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        let relative = (FileManager.default.subpaths(atPath: directory) ?? []).filter { $0.hasSuffix(".scenario") }
        return relative.sorted().map { base + "/" + $0 }
    }

    private static func unreadable(_ path: String, _ found: String) -> Job {
        let location = ScenarioLocation(file: path, line: 0, column: 0)
        return .known(ScenarioResult(title: path, location: location, failure: ScenarioFailure(
            kind: .file, location: location, expected: "a .scenario file or a directory of them", actual: found)))
    }

    // MARK: - Running

    /// Runs the jobs, up to ``parallelism`` at a time, keeping their order in the results.
    func runAll(_ jobs: [Job]) -> [ScenarioResult] {
        let results = ResultSlots(count: jobs.count)
        let runner = self
        let work = { @Sendable (index: Int) in
            switch jobs[index] {
            case .known(let result): results.set(index, result)
            case .scenario(let scenario): results.set(index, runner.run(scenario))
            }
        }
        if parallelism == 1 || jobs.count < 2 {
            jobs.indices.forEach(work)
        } else {
            let next = ResultSlots.Counter()
            DispatchQueue.concurrentPerform(iterations: min(parallelism, jobs.count)) { _ in
                while let index = next.take(below: jobs.count) { work(index) }
            }
        }
        return results.values
    }
}

/// Results filled in by concurrent workers.
private final class ResultSlots: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [ScenarioResult?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ result: ScenarioResult) { lock.withLock { slots[index] = result } }

    var values: [ScenarioResult] { lock.withLock { slots.compactMap { $0 } } }

    /// Hands out indices 0, 1, 2, … to workers.
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var next = 0

        func take(below limit: Int) -> Int? {
            lock.withLock {
                guard next < limit else { return nil }
                defer { next += 1 }
                return next
            }
        }
    }
}
