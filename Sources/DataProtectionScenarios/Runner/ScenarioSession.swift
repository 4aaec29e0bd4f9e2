import DataProtection
import DataProtectionSQLite
import Foundation
import SodiumBridge

/// One scenario being run: its device, store, clock, event log and named handles,
/// in a temporary directory of its own.
final class ScenarioSession {
    let scenario: Scenario
    let directory: URL
    let clock = VirtualClock()
    private(set) var store: ProtectedStore?
    private var observation: DeviceObservation?
    private let events = EventLog()
    /// What each name is bound to: the handle or connection its last successful `open … as` or
    /// `db open … as` made (a failed one leaves the name as it was).
    private var names: [String: Binding] = [:]
    /// What an open of the other kind took a name from while it was still open: out of reach of
    /// the scenario, closed like the others at `reboot`, `crash` and the end.
    private var displaced: [Binding] = []

    /// What a name is bound to.
    private enum Binding {
        case handle(ProtectedFileHandle)
        case database(ProtectedDatabase)

        /// Whether it is still open.
        var isOpen: Bool {
            switch self {
            case .handle(let handle): (try? handle.offset()) != nil
            case .database(let database): !database.isClosed
            }
        }
    }

    /// The handles the names are bound to.
    private var handles: [String: ProtectedFileHandle] {
        names.compactMapValues { if case .handle(let handle) = $0 { handle } else { nil } }
    }

    /// The connections the names are bound to.
    private var databases: [String: ProtectedDatabase] {
        names.compactMapValues { if case .database(let database) = $0 { database } else { nil } }
    }

    /// Every connection the session opened and may still hold, displaced ones included.
    private var allDatabases: [ProtectedDatabase] {
        (Array(names.values) + displaced).compactMap { if case .database(let database) = $0 { database } else { nil } }
    }

    init(scenario: Scenario, in parent: URL) {
        self.scenario = scenario
        directory = parent.appendingPathComponent("dp-scenario-\(UUID().uuidString)", isDirectory: true)
    }

    /// Runs every step until the first that fails; always cleans up.
    func run() -> ScenarioResult {
        defer { tearDown() }
        var result = ScenarioResult(title: scenario.title, location: scenario.location)
        do throws(DataProtectionError) {
            try setUp()
        } catch {
            let location = scenario.setup.location ?? scenario.location
            result.failure = ScenarioFailure(kind: .expectation, location: location, statement: "device",
                                             expected: "ok", actual: Outcome.failed(error).description)
            return result
        }
        for step in scenario.steps {
            result.stepsRun += 1
            if let mismatch = perform(step) {
                result.failure = ScenarioFailure(kind: .expectation, location: step.location, statement: step.source,
                                                 expected: mismatch.expected, actual: mismatch.actual)
                break
            }
        }
        return result
    }

    // MARK: - Interactive use (`dpctl shell`)

    /// Creates the device and store of the `device` statement.
    func start() throws(DataProtectionError) { try setUp() }

    /// Closes every handle and removes the session's directory.
    func finish() { tearDown() }

    /// Performs one step and describes what came of it: the value or `ok`, the error,
    /// or, when the statement carries `->`, whether it matched.
    func interact(_ step: Step) -> String {
        guard let store else { return "error: no device" }
        if case .expect(let check) = step.action {
            if let mismatch = self.check(check, device: store.device) {
                return "FAIL: expected \(mismatch.expected), got \(mismatch.actual)"
            }
            return "ok"
        }
        let outcome: Outcome
        do throws(DataProtectionError) {
            outcome = try execute(step.action, store: store)
        } catch {
            outcome = .failed(error)
        }
        if step.source.contains("->"), let mismatch = Self.mismatch(of: outcome, with: step.expectation) {
            return "FAIL: expected \(mismatch.expected), got \(mismatch.actual)"
        }
        return outcome.description
    }

    /// The device at this instant, for `state` in the shell: lock state, available classes,
    /// failed attempts, open handles and database connections, the virtual clock.
    func describeState() -> String {
        guard let store else { return "no device" }
        let device = store.device
        let available = ProtectionClass.allCases.filter { device.isAvailable($0) }.map(\.rawValue)
        let open = handles.sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value.mode.rawValue), \($0.value.protectionClass.rawValue))" }
        return [
            "state \(device.state.rawValue)",
            "available \(available.isEmpty ? "-" : available.joined(separator: ", "))",
            "failed-attempts \(device.failedPasscodeAttempts)",
            "handles \(open.isEmpty ? "-" : open.joined(separator: ", "))",
            "databases \(databases.isEmpty ? "-" : databases.keys.sorted().joined(separator: ", "))",
            "clock \(Duration.nanoseconds(clock.now.nanoseconds).scenarioSpelling)",
        ].joined(separator: "\n")
    }

    // MARK: - Set-up and tear-down

    /// The `device` statement: a fresh store on a virtual clock at 0.
    private func setUp() throws(DataProtectionError) {
        let store = try ProtectedStore(directory: directory, clock: clock, configuration: scenario.setup.configuration)
        self.store = store
        let events = events
        observation = store.device.addObserver { events.append($0) }
        if let passcode = scenario.setup.passcode {
            // `device passcode=<p>`: a booted device that has this passcode. Setting a
            // passcode needs the device unlocked, so unlock, set it, reboot; the unlock's
            // notification is then forgotten, so `expect events` starts from nothing.
            try store.device.unlock()
            try store.device.setPasscode(passcode)
            try store.device.reboot()
            events.removeAll()
        }
    }

    private func tearDown() {
        for case .handle(let handle) in Array(names.values) + displaced { try? handle.close() }
        closeDatabases()
        names.removeAll()
        displaced.removeAll()
        observation?.cancel()
        observation = nil
        store = nil
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: - Steps

    /// `nil` when the step produced what it expected.
    private func perform(_ step: Step) -> Mismatch? {
        guard let store else { return Mismatch(expected: "a device", actual: "none") }
        if case .expect(let check) = step.action {
            if case .error = step.expectation {
                return Mismatch(expected: step.expectation.description, actual: "an expect statement, which cannot fail with an error")
            }
            return self.check(check, device: store.device)
        }
        let outcome: Outcome
        do throws(DataProtectionError) {
            outcome = try execute(step.action, store: store)
        } catch {
            outcome = .failed(error)
        }
        return Self.mismatch(of: outcome, with: step.expectation)
    }

    /// What `expectation` finds wrong with `outcome`; an `ls` is compared without the side
    /// files of the databases in that directory.
    private static func mismatch(of outcome: Outcome, with expectation: StepExpectation) -> Mismatch? {
        guard case .names(let actual) = outcome else { return expectation.mismatch(with: outcome) }
        let sideFiles = sideFiles(in: actual)
        guard !sideFiles.isEmpty else { return expectation.mismatch(with: outcome) }
        var expected = expectation
        if case .names(let names) = expectation { expected = .names(names.filter { !sideFiles.contains($0) }) }
        return expected.mismatch(with: .names(actual.filter { !sideFiles.contains($0) }))
    }

    /// The names in a listing that are SQLite's side files of a database beside them:
    /// `<name>-journal` and `<name>-wal` where `<name>` is listed too. Whether one exists at a
    /// given moment is SQLite's business, so `ls` is compared without them, on both sides
    /// (scenario-language.md, "Rulings (1.1)"): a scenario's own file of such a name beside
    /// another goes unchecked, never wrongly failed.
    static func sideFiles(in names: [String]) -> Set<String> {
        let listed = Set(names)
        return Set(names.filter { name in
            ["-journal", "-wal"].contains { suffix in name.hasSuffix(suffix) && listed.contains(String(name.dropLast(suffix.count))) }
        })
    }

    private func execute(_ action: Action, store: ProtectedStore) throws(DataProtectionError) -> Outcome {
        let device = store.device
        switch action {
        case .unlock(let passcode): try device.unlock(passcode: passcode)
        case .lock: try device.lock()
        case .reboot:
            defer { closeDatabases() }  // after the device: a reboot flushes, a crash must not
            try device.reboot()
        case .crash:
            defer { closeDatabases() }
            try device.crash()
        case .advance(let duration): clock.advance(by: duration)
        case .setPasscode(let new): try device.setPasscode(new)
        case .changePasscode(let old, let new): try device.changePasscode(from: old, to: new)
        case .removePasscode(let old): try device.removePasscode(old)
        case .erase: try device.erase()
        case .expect: preconditionFailure("checks are not executed")

        case .mkdir(let path, let protection):
            try store.createDirectory(atPath: path, withIntermediateDirectories: true, protection: ProtectionChoice(protection))
        case .put(let path, let data, let protection): try store.write(data, to: path, protection: ProtectionChoice(protection))
        case .get(let path): return .data(try store.contents(atPath: path))
        case .rm(let path): try store.removeItem(atPath: path)
        case .mv(let from, let to): try store.moveItem(atPath: from, toPath: to)
        case .cp(let from, let to, let protection): try store.copyItem(atPath: from, toPath: to, protection: ProtectionChoice(protection))
        case .ls(let path): return .names(try store.contentsOfDirectory(atPath: path))  // compared without side files: `mismatch(of:with:)`
        case .stat(let path): return .attributes(try store.attributesOfItem(atPath: path))
        case .setClass(let path, let protection): try store.setProtectionClass(protection, ofItemAtPath: path)

        case .open(let path, let name, let mode, let create, let protection):
            if case .handle(let existing) = names[name], (try? existing.offset()) != nil {
                throw DataProtectionError(.invalidArgument, "A handle named \(name) is already open.", hint: "Close it first, or pick another name.")
            }
            bind(name, to: .handle(try store.openFile(atPath: path, mode: mode, create: create, protection: ProtectionChoice(protection))))
        case .read(let name, let count):
            return .data(try handle(name).read(upToCount: Int(clamping: count)))
        case .readToEnd(let name): return .data(try handle(name).readToEnd())
        case .write(let name, let data): try handle(name).write(contentsOf: data)
        case .seek(let name, let offset): try handle(name).seek(toOffset: offset)
        case .seekToEnd(let name): return .integer(try handle(name).seekToEnd())
        case .offset(let name): return .integer(try handle(name).offset())
        case .size(let name): return .integer(try handle(name).size())
        case .truncate(let name, let size): try handle(name).truncate(atOffset: size)
        case .sync(let name): try handle(name).synchronize()
        case .close(let name), .closeDatabase(let name): try close(name)

        case .openDatabase(let path, let name, let create, let protection, let wal):
            if case .database(let existing) = names[name], !existing.isClosed {
                throw DataProtectionError(.invalidArgument, "A connection named \(name) is already open.", hint: "Close it first, or pick another name.")
            }
            bind(name, to: .database(try ProtectedDatabase(atPath: path, in: store, create: create, protection: ProtectionChoice(protection),
                                                           journalMode: wal ? .wal : nil)))
        case .exec(let name, let sql): try database(name).execute(sql)
        case .query(let name, let sql): return .data(Self.text(of: try database(name).query(sql)))
        }
        return .done
    }

    /// `<name>.close`: closes what the name is bound to now, a handle or a connection; closing
    /// a closed one succeeds and does nothing (scenario-language.md, "Rulings (1.1)").
    private func close(_ name: String) throws(DataProtectionError) {
        switch names[name] {
        case .handle(let handle): try handle.close()
        case .database(let database): database.close()
        case nil: throw DataProtectionError(.invalidArgument, "Nothing is named \(name): no `open` or `db open` as \(name) succeeded.")
        }
    }

    /// Binds `name` to what an open that succeeded made; an open one of the other kind it named
    /// before stays open, out of the scenario's reach, until it is closed with the others.
    private func bind(_ name: String, to binding: Binding) {
        if let previous = names[name], previous.isOpen { displaced.append(previous) }
        names[name] = binding
    }

    private func database(_ name: String) throws(DataProtectionError) -> ProtectedDatabase {
        switch names[name] {
        case .database(let database):
            guard !database.isClosed else {
                throw DataProtectionError(.handleClosed, "The connection \(name) is closed.", hint: "Open it again (connections close at reboot).")
            }
            return database
        case .handle:
            throw DataProtectionError(.invalidArgument, "\(name) is a file handle, not a database connection: its last successful open was `open`.")
        case nil:
            throw DataProtectionError(.invalidArgument, "No connection named \(name): its `db open` did not succeed.")
        }
    }

    /// `reboot`, `crash` and the end of a scenario close every connection, as they close handles.
    private func closeDatabases() {
        for database in allDatabases { database.close() }
    }

    /// Rows as text (scenario language 1.1): columns joined by `|`, rows by a newline,
    /// NULL as nothing, numbers as SQLite's own text, blobs as their bytes.
    static func text(of rows: [SQLiteRow]) -> Data {
        var text = Data()
        for (index, row) in rows.enumerated() {
            if index > 0 { text.append(0x0A) }
            text.append(row.listModeText)
        }
        return text
    }

    private func handle(_ name: String) throws(DataProtectionError) -> ProtectedFileHandle {
        switch names[name] {
        case .handle(let handle): return handle
        case .database:
            throw DataProtectionError(.invalidArgument, "\(name) is a database connection, not a file handle: its last successful open was `db open`.")
        case nil:
            throw DataProtectionError(.invalidArgument, "No handle named \(name): its `open` did not succeed.")
        }
    }

    // MARK: - Checks

    private func check(_ check: DeviceCheck, device: Device) -> Mismatch? {
        switch check {
        case .state(let expected):
            let actual = device.state
            return actual == expected ? nil : Mismatch(expected: "state \(expected)", actual: "state \(actual)")
        case .available(let classes), .unavailable(let classes):
            let wanted: Bool
            if case .available = check { wanted = true } else { wanted = false }
            let wrong = classes.filter { device.isAvailable($0) != wanted }
            guard !wrong.isEmpty else { return nil }
            return Mismatch(expected: "\(check)",
                            actual: wrong.map(\.rawValue).joined(separator: ", ") + (wanted ? " unavailable" : " available"))
        case .events(let expected):
            let actual = events.drain()
            return actual == expected ? nil : Mismatch(expected: Self.events(expected), actual: Self.events(actual))
        case .failedAttempts(let expected):
            let actual = device.failedPasscodeAttempts
            return actual == expected ? nil : Mismatch(expected: "failed-attempts \(expected)", actual: "failed-attempts \(actual)")
        case .protectedDataAvailable(let expected):
            let actual = device.isProtectedDataAvailable
            return actual == expected ? nil
                : Mismatch(expected: "protected-data-available \(expected)", actual: "protected-data-available \(actual)")
        }
    }

    private static func events(_ events: [DeviceNotification]) -> String {
        events.isEmpty ? "no events" : "events " + events.map(\.rawValue).joined(separator: " ")
    }
}

/// The notifications posted since the last drain (observers run on the posting thread).
private final class EventLog: Sendable {
    private let events = Locked<[DeviceNotification]>([])
    func append(_ event: DeviceNotification) { events.withLock { $0.append(event) } }
    func removeAll() { events.withLock { $0.removeAll() } }
    func drain() -> [DeviceNotification] {
        events.withLock { events in
            defer { events.removeAll() }
            return events
        }
    }
}
