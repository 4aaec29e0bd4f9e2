import DataProtection
import Foundation

/// A scenario written in Swift: the same statements as a `.scenario` file, each
/// recording the source location of its call so failures point at your code.
///
/// ```swift
/// @Test func completeFileLocksWithTheDevice() {
///     Timeline("complete file locks with the device", passcode: "1234", grace: .seconds(10))
///         .unlock("1234")
///         .put("Documents/log.txt", "hello", class: .complete)
///         .lock()
///         .advance(.seconds(11))
///         .get("Documents/log.txt", expect: .error(.protectedDataUnavailable))
///         .expect(.state(.locked))
///         .assertPasses()   // records an issue at the failing step's line
/// }
/// ```
///
/// Class parameters are optional, so class D is written `ProtectionClass.none`
/// (a bare `.none` means "no class given").
///
/// A timeline is a value: each method returns a copy with one more step. Every
/// step takes an `expect:` (default `.ok`: it must succeed). ``run(using:)``
/// returns the ``ScenarioResult``; `assertPasses(using:)` (in the DataProtectionScenarioTesting module, when Swift Testing
/// is available) records a failure as an issue at the failing step's call.
public struct Timeline: Sendable {
    /// The scenario built so far.
    public private(set) var scenario: Scenario

    /// Starts a timeline: the `device` statement. With a `passcode`, the device starts
    /// booted with that passcode set (and no event recorded).
    public init(
        _ title: String, passcode: String? = nil, grace: Duration = .zero, eraseAfter failedAttempts: Int? = nil,
        inactivity: Duration = DeviceConfiguration().inactivityPeriod,
        fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column
    ) {
        let location = ScenarioLocation(file: fileID, line: line, column: column, filePath: filePath)
        scenario = Scenario(
            title: title, location: location,
            setup: DeviceSetup(passcode: passcode, gracePeriod: grace, eraseAfterFailedAttempts: failedAttempts,
                               inactivityPeriod: inactivity, location: location))
    }

    /// Appends any action (what every other method does).
    public func step(
        _ action: Action, expect expectation: StepExpectation = .ok,
        fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column
    ) -> Timeline {
        var copy = self
        copy.scenario.steps.append(Step(action, expectation: expectation,
                                        location: ScenarioLocation(file: fileID, line: line, column: column, filePath: filePath)))
        return copy
    }

    /// Runs the timeline on a fresh device.
    public func run(using runner: ScenarioRunner = ScenarioRunner()) -> ScenarioResult {
        runner.run(scenario)
    }

    // MARK: - Device

    /// `unlock [<passcode>]` (`nil`: a bare unlock).
    public func unlock(_ passcode: String? = nil, expect: StepExpectation = .ok,
                       fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.unlock(passcode: passcode), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `lock`
    public func lock(fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.lock, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `reboot`
    public func reboot(expect: StepExpectation = .ok,
                       fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.reboot, expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `crash`
    public func crash(expect: StepExpectation = .ok,
                      fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.crash, expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `advance <duration>`
    public func advance(_ duration: Duration,
                        fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.advance(duration), fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `set-passcode <new>`
    public func setPasscode(_ new: String, expect: StepExpectation = .ok,
                            fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.setPasscode(new), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `change-passcode <old> <new>`
    public func changePasscode(from old: String, to new: String, expect: StepExpectation = .ok,
                               fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.changePasscode(old: old, new: new), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `remove-passcode <old>`
    public func removePasscode(_ old: String, expect: StepExpectation = .ok,
                               fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.removePasscode(old: old), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `erase`
    public func erase(expect: StepExpectation = .ok,
                      fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.erase, expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `expect …`: `.state(.locked)`, `.available([.complete])`, `.events([...])`, `.failedAttempts(3)`, …
    public func expect(_ check: DeviceCheck,
                       fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.expect(check), fileID: fileID, filePath: filePath, line: line, column: column)
    }

    // MARK: - Files

    /// `mkdir <path> [class=<class>]`
    public func mkdir(_ path: String, class protection: ProtectionChoice = .inherited, expect: StepExpectation = .ok,
                      fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.mkdir(path: path, protection: protection.protectionClass), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `put <path> "<text>" [class=<class>]` (the UTF-8 bytes of `text`).
    public func put(_ path: String, _ text: String, class protection: ProtectionChoice = .inherited, expect: StepExpectation = .ok,
                    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        put(path, Data(text.utf8), class: protection, expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `put <path> <data> [class=<class>]`
    public func put(_ path: String, _ data: Data, class protection: ProtectionChoice = .inherited, expect: StepExpectation = .ok,
                    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.put(path: path, data: data, protection: protection.protectionClass), expect: expect,
             fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `get <path>`; expect `.text("…")` or `.data(…)` to check the contents.
    public func get(_ path: String, expect: StepExpectation = .ok,
                    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.get(path: path), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `rm <path>`
    public func rm(_ path: String, expect: StepExpectation = .ok,
                   fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.rm(path: path), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `mv <from> <to>`
    public func mv(_ from: String, _ to: String, expect: StepExpectation = .ok,
                   fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.mv(from: from, to: to), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `cp <from> <to> [class=<class>]`
    public func cp(_ from: String, _ to: String, class protection: ProtectionChoice = .inherited, expect: StepExpectation = .ok,
                   fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.cp(from: from, to: to, protection: protection.protectionClass), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `ls <dir>`; expect `.names([...])` to check the listing (any order).
    public func ls(_ path: String, expect: StepExpectation = .ok,
                   fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.ls(path: path), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `stat <path>`; expect `.attributes(class:size:type:)` to check the given keys.
    public func stat(_ path: String, expect: StepExpectation = .ok,
                     fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.stat(path: path), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `set-class <path> <class>`
    public func setClass(_ path: String, _ protection: ProtectionClass, expect: StepExpectation = .ok,
                         fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.setClass(path: path, protection: protection), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    // MARK: - Handles

    /// `open <path> as <handle> [mode=…] [create] [class=…]`
    public func open(_ path: String, as handle: String, mode: ProtectedFileHandle.Mode = .update, create: Bool = false,
                     class protection: ProtectionChoice = .inherited, expect: StepExpectation = .ok,
                     fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.open(path: path, handle: handle, mode: mode, create: create, protection: protection.protectionClass), expect: expect,
             fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.read <count>`
    public func read(_ handle: String, _ count: UInt64, expect: StepExpectation = .ok,
                     fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.read(handle: handle, count: count), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.read-to-end`
    public func readToEnd(_ handle: String, expect: StepExpectation = .ok,
                          fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.readToEnd(handle: handle), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.write "<text>"`
    public func write(_ handle: String, _ text: String, expect: StepExpectation = .ok,
                      fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        write(handle, Data(text.utf8), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.write <data>`
    public func write(_ handle: String, _ data: Data, expect: StepExpectation = .ok,
                      fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.write(handle: handle, data: data), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.seek <offset>`
    public func seek(_ handle: String, to offset: UInt64, expect: StepExpectation = .ok,
                     fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.seek(handle: handle, offset: offset), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.seek-end`; expect `.integer(n)` to check the new offset.
    public func seekToEnd(_ handle: String, expect: StepExpectation = .ok,
                          fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.seekToEnd(handle: handle), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.offset`; expect `.integer(n)`.
    public func offset(_ handle: String, expect: StepExpectation = .ok,
                       fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.offset(handle: handle), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.size`; expect `.integer(n)`.
    public func size(_ handle: String, expect: StepExpectation = .ok,
                     fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.size(handle: handle), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.truncate <size>`
    public func truncate(_ handle: String, to size: UInt64, expect: StepExpectation = .ok,
                         fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.truncate(handle: handle, size: size), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.sync`
    public func sync(_ handle: String, expect: StepExpectation = .ok,
                     fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.sync(handle: handle), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<handle>.close`
    public func close(_ handle: String, expect: StepExpectation = .ok,
                      fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.close(handle: handle), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    // MARK: - Databases (scenario language 1.1)

    /// `db open <path> as <database> [create] [class=…] [wal]`
    public func openDatabase(_ path: String, as database: String, create: Bool = false, class protection: ProtectionChoice = .inherited,
                             wal: Bool = false, expect: StepExpectation = .ok,
                             fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.openDatabase(path: path, database: database, create: create, protection: protection.protectionClass, wal: wal), expect: expect,
             fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<database>.exec "<sql>"`
    public func exec(_ database: String, _ sql: String, expect: StepExpectation = .ok,
                     fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.exec(database: database, sql: sql), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<database>.query "<sql>"`; expect `.data(…)` with the rows as text (`"1|alice\n2|bob"`, `Data()` for none).
    public func query(_ database: String, _ sql: String, expect: StepExpectation = .ok,
                      fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.query(database: database, sql: sql), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }

    /// `<database>.close`
    public func closeDatabase(_ database: String, expect: StepExpectation = .ok,
                              fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) -> Timeline {
        step(.closeDatabase(database: database), expect: expect, fileID: fileID, filePath: filePath, line: line, column: column)
    }
}
