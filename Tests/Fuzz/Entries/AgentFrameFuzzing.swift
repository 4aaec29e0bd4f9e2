import DataProtectionAgent
import Foundation

/// The agent's frame decoder and message decoders, as the agent meets bytes from a client
/// (and a client from an agent): a stream cut into frames, arriving in pieces of any size.
/// Every frame that decodes must encode back to the same bytes.
enum AgentFrameFuzzing {
    static func run(_ data: Data) {
        var input = FuzzInput(data)
        let pieceSize = Int(input.byte() % 64) + 1
        let stream = [UInt8](input.rest())
        var offset = 0
        let reader = AgentFrameReader { buffer in
            let count = min(buffer.count, pieceSize, stream.count - offset)
            for index in 0..<count { buffer[index] = stream[offset + index] }
            offset += count
            return (count, nil)
        }
        while let frame = try? reader.next() {
            if let request = try? AgentRequest.decode(frame.payload) {
                precondition(request.encoded() == frame.payload, "a request that does not encode back to its frame")
            }
            if let response = try? AgentResponse.decode(frame.payload) {
                precondition(try! AgentResponse.decode(response.encoded()) == response, "a response that does not survive a round trip")
            }
        }
    }
}
