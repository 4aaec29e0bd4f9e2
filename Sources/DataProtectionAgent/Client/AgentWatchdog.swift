import DataProtection
import Foundation
import SocketBridge

/// How long a client waits for a silent agent (`Keys/agent-protocol.md`, "Trust and limits").
///
/// The connection and the agent's hello must come within ``hello``. After that a client
/// waits for each response as long as the agent makes progress: a byte on the socket, or
/// the agent's process working (using at least 5 % of a CPU). Only
/// ``silence`` with neither ends the wait: an agent stopped by `SIGSTOP`, gone, or asleep
/// with nothing coming. A long Argon2id unlock or a transfer of gigabytes works; a stopped
/// agent fails within the bound, with its pid and socket named.
public struct AgentPatience: Sendable, Hashable {
    /// The most time from `connect` to the agent's hello.
    public var hello: Duration
    /// The most time a request waits with no sign of the agent's progress.
    public var silence: Duration

    /// Connect and hello within `hello`; then no more than `silence` with no progress.
    public init(hello: Duration = .seconds(10), silence: Duration = .seconds(20)) {
        self.hello = hello
        self.silence = silence
    }
}

/// Watches one agent on behalf of a client waiting for it.
struct AgentWatchdog: Sendable {
    let agentProcessIdentifier: Int32
    let socketPath: String
    let patience: AgentPatience

    /// How often the agent's process is looked at while nothing comes.
    private static let glance: Int32 = 250

    /// Waits until `socket` has bytes to read (or its peer hung up), failing after
    /// ``AgentPatience/silence`` with no progress, or at `deadline` whatever the progress
    /// (`waitingOnOthers`: the agent waits on someone else, a pipe this client passed; it
    /// makes progress as long as it runs).
    func waitReadable(_ socket: UnixSocket, deadline: ContinuousClock.Instant? = nil, waitingOnOthers: Bool = false)
        throws(DataProtectionError) {
        var lastProgress = ContinuousClock.now
        var lastSample = AgentProcessSample(agentProcessIdentifier)
        var lastSampled = lastProgress
        while true {
            let readable: Bool
            do {
                readable = try socket.waitUntilReadable(milliseconds: Self.glance)
            } catch {
                throw AgentConnection.broken(error)
            }
            if readable { return }
            let now = ContinuousClock.now
            if let deadline, now >= deadline {
                throw silent(for: patience.hello, what: "its hello")
            }
            guard deadline == nil, now - lastSampled >= .seconds(1) else { continue }
            let sample = AgentProcessSample(agentProcessIdentifier)
            if sample.showsProgress(since: lastSample, waitingOnOthers: waitingOnOthers) { lastProgress = now }
            (lastSample, lastSampled) = (sample, now)
            if now - lastProgress >= patience.silence {
                throw silent(for: patience.silence, what: "an answer", sample: sample)
            }
        }
    }

    private func silent(for limit: Duration, what: String, sample: AgentProcessSample? = nil) -> DataProtectionError {
        let state = switch sample?.state {
        case "T", "t": " (it is stopped)"
        case nil where sample != nil: " (it is gone)"
        default: ""
        }
        return DataProtectionError(
            .ioFailure,
            "The agent (pid \(agentProcessIdentifier), socket \(socketPath)) sent \(what == "its hello" ? "no hello" : "nothing") within \(Int(AgentServer.seconds(limit))) s\(state).",
            hint: "Is it stopped or stuck? `kill -CONT \(agentProcessIdentifier)` resumes a stopped agent; `kill \(agentProcessIdentifier)` then `dpctl agent start` replaces it.")
    }
}

/// The agent's process at one moment, from `/proc/<pid>/stat`: its state and CPU time.
struct AgentProcessSample: Equatable {
    /// The state letter (`R`, `S`, `D`, `T`, …), `nil` when the process is gone or unseen.
    let state: Character?
    /// User plus system time, in clock ticks.
    let cpuTime: UInt64

    init(_ pid: Int32) {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else {
            (state, cpuTime) = (nil, 0)
            return
        }
        // After "pid (comm)": state is field 3, utime and stime fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        state = fields.first?.first
        cpuTime = fields.count > 12 ? (UInt64(fields[11]) ?? 0) + (UInt64(fields[12]) ?? 0) : 0
    }

    /// Whether the agent worked since `earlier` (a second before): used at least 5 clock
    /// ticks of CPU (an idle agent's timers use less), or, when it waits on someone else, is
    /// there and not stopped. (The state letter is its main thread's, the CPU time all its threads'.)
    func showsProgress(since earlier: AgentProcessSample, waitingOnOthers: Bool) -> Bool {
        guard let state, state != "T", state != "t", state != "Z", state != "X" else { return false }
        return cpuTime >= earlier.cpuTime + 5 || waitingOnOthers
    }
}
