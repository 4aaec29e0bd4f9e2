import Foundation
import SystemPackage
import Testing
@testable import DataProtection

@Suite struct PipelinedOutputTests {
    /// Regression: the output waited for its queue in deinit; when the caller let it go while a
    /// piece was still being written, the piece's block released it last, on the queue itself,
    /// and `queue.sync` trapped (SIGILL in `dpctl cat big | head -c 10`, seen in CI).
    @Test func releasedWhileAPieceIsStillBeingWritten() throws {
        let pipe = try FileDescriptor.pipe()
        defer {
            try? pipe.readEnd.close()
            try? pipe.writeEnd.close()
        }
        var output: PipelinedOutput? = PipelinedOutput(pipe.writeEnd, describe: "a pipe")
        try output?.write(Data(repeating: 7, count: 1 << 20))  // more than the pipe holds: the write blocks
        output = nil                                             // the queued block now holds the last reference
        var drained = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while drained < 1 << 20 {
            let count = try buffer.withUnsafeMutableBytes { try pipe.readEnd.read(into: $0) }
            guard count > 0 else { break }
            drained += count
        }
        #expect(drained == 1 << 20)
        usleep(100_000)  // the block finishes and releases the output on the queue
        #expect(output == nil)
    }
}
