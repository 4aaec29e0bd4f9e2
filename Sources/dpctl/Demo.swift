import ArgumentParser
import DataProtection
import Foundation
import SodiumBridge

/// `dpctl demo`: a narrated tour of the device on a temporary directory.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A narrated tour: files of every class, lock and grace period, handles, throttling, erase.",
        discussion: """
            Runs on a temporary device (removed afterwards) with a virtual clock, so the \
            grace period, the 48 h inactivity expiry and the passcode delays happen at once. \
            The passcode key derivation is real and calibrated on this machine.
            """
    )

    @Option(name: .customLong("keep"), help: "Keep the demo device directory at this path instead of a temporary one.")
    var keepDirectory: String?

    func run() throws {
        let directory = keepDirectory.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("dpctl-demo-\(UUID().uuidString)")
        defer { if keepDirectory == nil { try? FileManager.default.removeItem(at: directory) } }
        do {
            try Tour(directory: directory).run()
        } catch {
            throw error.reportAndExit()
        }
    }
}

/// The demo's script.
private struct Tour {
    let directory: URL
    let clock = VirtualClock()
    let wall = ContinuousClock()

    func run() throws(DataProtectionError) {
        print("DataProtection demo: a simulated device and its protected store in \(directory.path)")
        print("(virtual clock: waits happen instantly; Argon2id and the encryption run for real)")

        let store = try ProtectedStore(
            directory: directory, clock: clock,
            configuration: DeviceConfiguration(gracePeriod: .seconds(10), eraseAfterFailedAttempts: 10))
        let device = store.device
        let events = EventLog()
        let observation = device.addObserver { events.append($0) }
        defer { observation.cancel() }

        section("1. Boot: before first unlock only class `none` is available")
        show(device)

        section("2. First unlock, then set the passcode 1234 (Argon2id calibrated to ~90 ms here)")
        try device.unlock()
        try device.setPasscode("1234")
        if let (operations, memory) = device.passcodeDerivation {
            say("Argon2id parameters chosen: \(operations) passes over \(memory >> 20) MiB")
        }

        section("3. One file of every class in Documents/, and two open handles")
        for protectionClass in ProtectionClass.allCases {
            try store.write(Data("secret kept under \(protectionClass)\n".utf8), to: "Documents/\(protectionClass).txt",
                            protection: ProtectionChoice(protectionClass))
        }
        say("ls Documents: \(try store.contentsOfDirectory(atPath: "Documents").joined(separator: "  "))")
        let onDisk = (try? FileManager.default.subpathsOfDirectory(atPath: directory.appendingPathComponent("files").path)) ?? []
        say("on disk the names are encrypted, e.g. \(onDisk.first { $0.count > 40 }.map { String($0.prefix(44)) + "…" } ?? "?")")
        let diary = try store.openFile(atPath: "Documents/diary.txt", create: true, protection: .complete)
        try diary.write(contentsOf: Data("dear diary, ".utf8))
        let upload = try store.openFile(atPath: "Documents/upload.part", create: true, protection: .completeUnlessOpen)
        try upload.write(contentsOf: Data("part 1; ".utf8))
        say("opened Documents/diary.txt (complete) and Documents/upload.part (completeUnlessOpen), wrote to both")

        section("4. Lock with a 10 s grace period")
        let lockStart = wall.now
        try device.lock()
        let lockTime = wall.now - lockStart
        say("events: \(events.drain())")
        clock.advance(by: .seconds(5))
        say("t+5 s, inside the grace period:")
        attempt("read Documents/complete.txt") { () throws(DataProtectionError) in _ = try store.contents(atPath: "Documents/complete.txt") }
        clock.advance(by: .seconds(5))
        say("t+10 s, grace over: the class A key and the class B secret key are wiped")
        show(device)
        for protectionClass in ProtectionClass.allCases {
            attempt("read Documents/\(protectionClass).txt") { () throws(DataProtectionError) in
                _ = try store.contents(atPath: "Documents/\(protectionClass).txt")
            }
        }
        attempt("write through the open complete handle") { () throws(DataProtectionError) in
            try diary.write(contentsOf: Data("more".utf8))
        }
        attempt("write through the open completeUnlessOpen handle") { () throws(DataProtectionError) in
            try upload.write(contentsOf: Data("part 2".utf8))
        }
        attempt("create and write a new completeUnlessOpen file while locked") { () throws(DataProtectionError) in
            try store.write(Data("made while locked".utf8), to: "Documents/inbox.msg", protection: .completeUnlessOpen)
        }
        attempt("create a new complete file while locked") { () throws(DataProtectionError) in
            try store.write(Data("no".utf8), to: "Documents/new.txt", protection: .complete)
        }
        attempt("list, stat and rename work in every state") { () throws(DataProtectionError) in
            _ = try store.attributesOfItem(atPath: "Documents/complete.txt")
            try store.moveItem(atPath: "Documents/inbox.msg", toPath: "Documents/inbox-1.msg")
        }
        try upload.close()
        attempt("reopen the completeUnlessOpen file once closed") { () throws(DataProtectionError) in
            _ = try store.contents(atPath: "Documents/upload.part")
        }

        section("5. 48 h of continuous lock: class `completeWhenUserInactive` goes too")
        clock.advance(by: .seconds(48 * 3600))
        attempt("read Documents/completeWhenUserInactive.txt") { () throws(DataProtectionError) in
            _ = try store.contents(atPath: "Documents/completeWhenUserInactive.txt")
        }

        section("6. Wrong passcodes: Apple's escalating delays")
        for attempt in 1...5 {
            try? attemptUnlock(device, "000\(attempt)")
        }
        say("an attempt inside the delay is refused and not counted:")
        try? attemptUnlock(device, "0006")
        clock.advance(by: .seconds(60))
        say("1 minute later:")
        try? attemptUnlock(device, "0006")
        clock.advance(by: .seconds(5 * 60))
        say("5 minutes later, the same wrong passcode again is not counted twice:")
        try? attemptUnlock(device, "0006")
        try attemptUnlock(device, "1234")
        say("events: \(events.drain())")
        attempt("the same complete handle works again") { () throws(DataProtectionError) in
            try diary.write(contentsOf: Data("written after unlock".utf8))
            try diary.close()
        }
        say("Documents/diary.txt: \"\(String(decoding: try store.contents(atPath: "Documents/diary.txt"), as: UTF8.self))\"")
        say("Documents/upload.part: \"\(String(decoding: try store.contents(atPath: "Documents/upload.part"), as: UTF8.self))\"")

        section("7. Reboot: every class but `none` needs the first unlock again")
        try device.reboot()
        show(device)
        let unlockStart = wall.now
        try device.unlock(passcode: "1234")
        let unlockTime = wall.now - unlockStart
        say("unlock 1234: ok")

        section("8. Timing on this machine (wall clock)")
        if let (operations, memory) = device.passcodeDerivation {
            let kdf = try PasscodeCost.measureDerivation(operations: operations, memoryBytes: memory)
            say("unlock: \(format(unlockTime)); Argon2id alone, timed separately: \(format(kdf))")
        }
        say("lock (post the notification, schedule discards): \(format(lockTime))")

        section("9. Ten consecutive failures erase the device (erase-after-10 is on)")
        try device.lock()
        for attempt in 0..<30 {
            guard let error = failure(of: { () throws(DataProtectionError) in try device.unlock(passcode: "9\(attempt)") }) else { continue }
            if error.code == .passcodeAttemptsDelayed {
                clock.advance(by: error.retryAfter ?? .seconds(3600))
            } else if error.code == .deviceErased {
                say(error.message)
                break
            }
        }
        say("after erase: state \(device.state), passcode set: \(device.hasPasscode), failed attempts: \(device.failedPasscodeAttempts)")
        say("files left: \(try store.contentsOfDirectory(atPath: "/").count)")
        print("\nDone.")
    }

    /// Runs one step and narrates its outcome: `ok`, or the error code and why.
    private func attempt(_ what: String, _ body: () throws(DataProtectionError) -> Void) {
        if let error = failure(of: body) {
            say("\(what): \(error.code.rawValue)")
        } else {
            say("\(what): ok")
        }
    }

    private func attemptUnlock(_ device: Device, _ passcode: String) throws(DataProtectionError) {
        do {
            try device.unlock(passcode: passcode)
            say("unlock \(passcode): ok (state \(device.state))")
        } catch {
            var line = "unlock \(passcode): \(error.code.rawValue), \(device.failedPasscodeAttempts) failed"
            if let next = device.nextPasscodeAttemptAllowed {
                line += "; next attempt in \(format(clock.now.duration(to: next)))"
            }
            say(line)
            throw error
        }
    }

    private func failure(of body: () throws(DataProtectionError) -> Void) -> DataProtectionError? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }

    private func section(_ title: String) { print("\n\(title)") }
    private func say(_ line: String) { print("   \(line)") }

    private func show(_ device: Device) {
        let available = ProtectionClass.allCases.filter { device.isAvailable($0) }.map(\.rawValue)
        let unavailable = ProtectionClass.allCases.filter { !device.isAvailable($0) }.map(\.rawValue)
        say("state: \(device.state); isProtectedDataAvailable: \(device.isProtectedDataAvailable)")
        say("available:   \(available.isEmpty ? "-" : available.joined(separator: ", "))")
        say("unavailable: \(unavailable.isEmpty ? "-" : unavailable.joined(separator: ", "))")
    }

    private func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        if milliseconds >= 60_000 { return "\(Int(milliseconds / 60_000)) min" }
        if milliseconds >= 1000 { return "\(Int(milliseconds / 1000)) s" }
        if milliseconds >= 1 { return String(format: "%.1f ms", milliseconds) }
        return String(format: "%.0f µs", milliseconds * 1000)
    }
}

/// Notifications collected by a synchronous observer.
private final class EventLog: Sendable {
    private let events = Locked<[DeviceNotification]>([])
    func append(_ event: DeviceNotification) { events.withLock { $0.append(event) } }
    func drain() -> String {
        events.withLock { events in
            defer { events.removeAll() }
            return events.isEmpty ? "none" : events.map(\.rawValue).joined(separator: ", ")
        }
    }
}
