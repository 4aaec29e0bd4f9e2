import TestSupport
import DataProtection
@testable import DataProtectionAgent
import Foundation
import Testing

/// An agent that follows the login session (issue 35), against python-dbusmock's logind and
/// GNOME screensaver on private buses: each lock source locks, nothing unlocks, a lost bus
/// unlocks nothing and the agent keeps serving.
@Suite("Agent: following the login session", .serialized, .enabled(if: SessionBusFixture.available))
struct AgentSessionFollowingTests {
    enum Source: String, CaseIterable, Sendable {
        case lockSignal, lockedHint, prepareForSleep, screensaver
    }

    /// An agent following `buses` (both required to answer: `.required`), grace `grace`.
    /// A second client watching every event of `agent`, once its watch is in place.
    static func watch(_ agent: AgentFixture) throws -> EventLog {
        let events = EventLog()
        let watcher = try agent.client()
        let watching = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? watcher.device.watchAll(ready: { watching.signal() }) { event in
                events.append(event.name)
                return true
            }
        }
        #expect(watching.wait(timeout: .now() + 5) == .success)
        return events
    }

    static func agent(_ buses: SessionBusFixture, grace: Duration = .zero, following: AgentServer.SessionFollowing = .required) throws -> AgentFixture {
        var configuration = AgentServer.Configuration(autoLock: nil, sessionFollowing: following)
        configuration.systemBusAddress = buses.systemAddress.isEmpty ? "unix:path=\(buses.directory.path)/none" : buses.systemAddress
        configuration.sessionBusAddress = buses.sessionAddress.isEmpty ? "unix:path=\(buses.directory.path)/none" : buses.sessionAddress
        configuration.loginSessionIdentifier = SessionBusFixture.sessionIdentifier
        return try AgentFixture(grace: grace, configuration: configuration)
    }

    static func trigger(_ source: Source, _ buses: SessionBusFixture) throws {
        switch source {
        case .lockSignal: try buses.lockSession()
        case .lockedHint: try buses.setLockedHint(true)
        case .prepareForSleep: try buses.prepareForSleep(true)
        case .screensaver: try buses.setScreensaver(true)
        }
    }

    @Test("each lock source moves an unlocked agent to locked within 1 s, and a client's complete handle fails after it",
          arguments: Source.allCases)
    func eachSourceLocks(_ source: Source) throws {
        let buses = try SessionBusFixture()
        let agent = try Self.agent(buses)
        defer { agent.tearDown() }
        let client = try agent.client()
        try client.device.unlock(passcode: "1234")
        let handle = try client.openFile(atPath: "secret", mode: .update, create: true, protection: .complete)
        try handle.write(contentsOf: Data("secret".utf8))
        let status = try client.status()
        #expect(status.sessionFollowing?.sources.contains("login1 session c1 (bus at \(buses.systemAddress))") == true,
                "\(String(describing: status.sessionFollowing))")
        #expect(status.sessionFollowing?.sources.contains("screensavers (bus at \(buses.sessionAddress))") == true)
        let start = ContinuousClock.now
        try Self.trigger(source, buses)
        #expect(eventually(seconds: 1) { agent.device.state == .locked && !agent.device.isAvailable(.complete) },
                "\(source): still \(agent.device.state) after \(ContinuousClock.now - start)")
        expectCode(.protectedDataUnavailable) { try handle.write(contentsOf: Data("more".utf8)) }
        expectCode(.protectedDataUnavailable) { _ = try client.contents(atPath: "secret") }
        #expect(try client.device.state == .locked)
    }

    @Test("logind's signals count only from logind: the same Lock and Unlock sent by another connection do nothing")
    func onlyLogindSpeaksForLogind() throws {
        let buses = try SessionBusFixture(session: false)
        let agent = try Self.agent(buses)
        defer { agent.tearDown() }
        let client = try agent.client()
        try client.device.unlock(passcode: "1234")
        let events = try Self.watch(agent)
        // Any process of any user on the system bus can emit these; only logind's count.
        for signal in ["org.freedesktop.login1.Session.Lock", "org.freedesktop.login1.Session.Unlock"] {
            try buses.emit(buses.systemAddress, SessionBusFixture.sessionPath, signal)
        }
        try buses.emit(buses.systemAddress, "/org/freedesktop/login1", "org.freedesktop.login1.Manager.PrepareForSleep", true)
        Thread.sleep(forTimeInterval: 0.5)
        #expect(agent.device.state == .unlocked)
        #expect(events.names.isEmpty, "\(events.names)")
        try buses.lockSession()
        #expect(eventually(seconds: 1) { agent.device.state == .locked })
    }

    @Test("PrepareForSleep discards the keys at once even with a grace period; a session lock keeps its grace")
    func sleepSkipsTheGrace() throws {
        let buses = try SessionBusFixture()
        let agent = try Self.agent(buses, grace: .seconds(60))
        defer { agent.tearDown() }
        let client = try agent.client()
        try client.device.unlock(passcode: "1234")
        try buses.lockSession()
        #expect(eventually(seconds: 2) { agent.device.state == .locked })
        // Inside the grace period: the complete key is still there.
        #expect(agent.device.isAvailable(.complete))
        try buses.prepareForSleep(true)
        #expect(eventually(seconds: 1) { !agent.device.isAvailable(.complete) && !agent.device.isAvailable(.completeUnlessOpen) })
    }

    @Test("the session unlocking (Unlock, LockedHint false, the screensaver off) leaves the device locked, and watchers hear it")
    func unlockNeverUnlocks() throws {
        let buses = try SessionBusFixture()
        let agent = try Self.agent(buses)
        defer { agent.tearDown() }
        let client = try agent.client()
        try client.device.unlock(passcode: "1234")
        let events = try Self.watch(agent)
        try buses.lockSession()
        #expect(eventually(seconds: 1) { agent.device.state == .locked })
        try buses.unlockSession()
        try buses.setLockedHint(false)
        try buses.setScreensaver(true)
        try buses.setScreensaver(false)
        #expect(eventually(seconds: 5) { events.names.filter { $0 == "sessionUnlocked" }.count == 3 }, "\(events.names)")
        #expect(agent.device.state == .locked)
        #expect(!agent.device.isAvailable(.complete))
        #expect(events.names.contains("protectedDataWillBecomeUnavailable"))
        #expect(events.names.first { $0.hasPrefix("session") } == "sessionLocked")
        #expect(!events.names.contains("protectedDataDidBecomeAvailable"))
    }

    @Test("the system bus's daemon killed: an unlocked device stays unlocked, a locked one stays locked, the agent serves and says so")
    func busGoesAway() throws {
        let buses = try SessionBusFixture()
        let agent = try Self.agent(buses)
        defer { agent.tearDown() }
        let client = try agent.client()
        try client.device.unlock(passcode: "1234")
        try client.write(Data("kept".utf8), to: "file", protection: .complete)
        buses.killSystemBus()
        #expect(eventually(seconds: 5) { (try? client.status().sessionFollowing?.lostBuses.isEmpty) == false })
        // As it was: unlocked, and serving.
        #expect(agent.device.state == .unlocked)
        #expect(try client.contents(atPath: "file") == Data("kept".utf8))
        let status = try client.status()
        #expect(status.sessionFollowing?.sources == ["screensavers (bus at \(buses.sessionAddress))"], "\(String(describing: status.sessionFollowing))")
        // The session bus still locks; nothing unlocks.
        try buses.setScreensaver(true)
        #expect(eventually(seconds: 1) { agent.device.state == .locked })
        try buses.setScreensaver(false)
        Thread.sleep(forTimeInterval: 0.2)
        #expect(agent.device.state == .locked)
        expectCode(.protectedDataUnavailable) { _ = try client.contents(atPath: "file") }
        try client.device.unlock(passcode: "1234")
        #expect(try client.contents(atPath: "file") == Data("kept".utf8))
    }

    @Test("required with no bus answering: the agent does not start (ioFailure, naming both buses); when available: it serves, following nothing")
    func noBus() throws {
        let buses = try SessionBusFixture(system: false, session: false)
        do {
            let agent = try Self.agent(buses)
            agent.tearDown()
            Issue.record("an agent that must follow the session started without a bus")
        } catch let error as DataProtectionError {
            #expect(error.code == .ioFailure)
            #expect(error.message.contains("cannot follow the session"), "\(error.message)")
        }
        let agent = try Self.agent(buses, following: .whenAvailable)
        defer { agent.tearDown() }
        let client = try agent.client()
        #expect(try client.status().sessionFollowing == AgentSessionFollowing(sources: []))
        try client.device.unlock(passcode: "1234")
        #expect(try client.device.state == .unlocked)
    }
}

/// Event names collected by a watching thread.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []

    func append(_ name: String) {
        lock.lock()
        stored.append(name)
        lock.unlock()
    }

    var names: [String] {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }
}

/// The session fields of the wire (`Keys/agent-protocol.md` §5 and §6).
@Suite("Agent protocol: session events and the status's session fields")
struct AgentSessionWireTests {
    @Test("a status with and without the appended session fields decodes to itself; a session event round-trips")
    func roundTrips() throws {
        let base = AgentStatus(state: .locked, passcodeSet: true, failedPasscodeAttempts: 0, nextAttemptAllowedIn: nil,
                               autoLock: nil, autoLockIn: nil, keyDiscardIn: nil, availableClasses: [.none], agentProcessIdentifier: 42)
        var following = base
        following.sessionFollowing = AgentSessionFollowing(sources: ["login1 session 2 (system bus)", "screensavers (session bus)"],
                                                           lostBuses: ["system bus"])
        for status in [base, following] {
            #expect(try AgentStatus.decode(status.encoded()) == status)
        }
        // The appended fields cost nothing when absent: the body of before.
        #expect(following.encoded().count > base.encoded().count)
        #expect(Array(following.encoded().prefix(base.encoded().count)) == base.encoded())
        let event = AgentSessionEvent(change: .unlocked, source: "login1 Unlock", nanosecondsSince1970: 1_700_000_000_000_000_000)
        #expect(try AgentResponse.decode(AgentResponse.sessionEvent(event).encoded()) == .sessionEvent(event))
        #expect(AgentResponse.sessionEvent(event).encoded().first == 4)
    }
}
