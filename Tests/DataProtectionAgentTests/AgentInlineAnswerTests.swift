import DataProtection
@testable import DataProtectionAgent
import Foundation
import SocketBridge
import Testing

/// An answer that carries plaintext of a class that locks (`readFile` inline, a handle's
/// `read`, `sql`) is not delivered once that class's key is discarded, however slowly its
/// client reads (agent-protocol.md §10).
@Suite struct AgentInlineAnswerTests {
    @Test("a 1 MiB readFile answer a client does not read: at the discard the agent stops sending it and closes the connection")
    func unreadAnswerStopsAtTheDiscard() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let content = Data((0..<AgentWireFormat.maximumInlineData).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try agent.client().write(content, to: "a.bin", protection: .complete)
            let socket = try AgentProtocolTests.rawConnection(agent)
            defer { socket.close() }
            try socket.send(AgentProtocolTests.frame(AgentRequest.readFile(path: "a.bin").encoded()))
            // The agent fills the socket's buffer and waits for this client, which reads nothing yet.
            Thread.sleep(forTimeInterval: 0.5)
            try agent.device.lock()  // grace 0: the complete key goes now
            Thread.sleep(forTimeInterval: 0.5)
            var received = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while try socket.waitUntilReadable(milliseconds: 5000) {
                let count = (try? socket.receive(into: &buffer).count) ?? 0
                guard count > 0 else { break }
                received += count
            }
            print("unread answer: \(received) bytes of a \(content.count + 9)-byte frame delivered after the discard")
            #expect(received < content.count / 2, "delivered after the discard: \(received) bytes")
        }
    }

    @Test("an answer read promptly is delivered whole (the watch costs nothing to a reading client)")
    func promptAnswerIsWhole() throws {
        try withAgent { agent in
            try agent.device.unlock(passcode: "1234")
            let content = Data((0..<AgentWireFormat.maximumInlineData).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let client = try agent.client()
            try client.write(content, to: "a.bin", protection: .complete)
            #expect(try client.contents(atPath: "a.bin") == content)
            let handle = try client.openFile(atPath: "a.bin", mode: .read)
            #expect(try handle.read(upToCount: content.count) == content)
            try handle.close()
        }
    }
}
