import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A progress bar for a transfer the agent makes through a descriptor this process passed
/// it: the agent reads (`put`) or writes (`get -o`, `cat` into a file) through the same open
/// file, so its progress is the file's offset, which this process reads every 100 ms. A
/// pipe or a terminal has no offset: then no bar, as without the agent.
final class SharedOffsetProgress: Sendable {
    private let stopped = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let running: Bool

    /// Starts following `descriptor`'s offset from where it is now, when the bar is shown.
    init(descriptor: Int32, total: UInt64?, quiet: Bool) {
        let start = lseek(descriptor, 0, SEEK_CUR)
        let bar = ProgressBar(total: total, quiet: quiet)
        running = bar.enabled && start >= 0
        guard running else { return }
        let (stopped, finished) = (stopped, finished)
        nonisolated(unsafe) let drawn = bar
        Thread.detachNewThread {
            var shown: off_t = start
            while stopped.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
                let now = lseek(descriptor, 0, SEEK_CUR)
                if now > shown {
                    drawn.advance(by: Int(now - shown))
                    shown = now
                }
            }
            let now = lseek(descriptor, 0, SEEK_CUR)
            if now > shown { drawn.advance(by: Int(now - shown)) }
            drawn.finish()
            finished.signal()
        }
    }

    /// Stops following and completes the bar (before the caller prints anything else).
    func stop() {
        guard running else { return }
        stopped.signal()
        finished.wait()
    }
}
