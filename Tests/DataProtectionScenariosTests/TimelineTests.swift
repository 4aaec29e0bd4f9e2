import DataProtection
import DataProtectionScenarios
import DataProtectionScenarioTesting
import Foundation
import Testing

@Suite("Timeline (scenarios in Swift)")
struct TimelineTests {
    @Test("the spec's example, written in Swift, passes")
    func specExample() {
        Timeline("complete file locks with the device", passcode: "1234", grace: .seconds(10))
            .unlock("1234")
            .open("Documents/log.txt", as: "h", create: true, class: .complete)
            .write("h", "hello")
            .lock()
            .advance(.seconds(5))
            .write("h", " world")
            .advance(.seconds(6))
            .write("h", "!", expect: .error(.protectedDataUnavailable))
            .get("Documents/log.txt", expect: .error(.protectedDataUnavailable))
            .unlock("1234")
            .get("Documents/log.txt", expect: .text("hello world"))
            .expect(.events([.protectedDataDidBecomeAvailable, .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable]))
            .assertPasses(using: Support.runner)
    }

    @Test("every statement has a method")
    func everyStatement() {
        let result = Timeline("all statements", passcode: "1", inactivity: .seconds(3600))
            .unlock("1")
            .setPasscode("2", expect: .error(.invalidArgument))
            .changePasscode(from: "1", to: "2")
            .removePasscode("2")
            .setPasscode("3")
            .mkdir("D", class: .none)
            .put("D/a", Data([1, 2, 3]))
            .put("D/b", "text", class: .complete)
            .get("D/a", expect: .data(Data([1, 2, 3])))
            .cp("D/a", "D/c", class: .completeUnlessOpen)
            .mv("D/c", "D/d")
            .ls("D", expect: .names(["a", "b", "d"]))
            .stat("D/d", expect: .attributes(class: .completeUnlessOpen, size: 3, type: .file))
            .setClass("D/d", .complete)
            .rm("D/d")
            .open("D/a", as: "h", mode: .update)
            .read("h", 1, expect: .data(Data([1])))
            .readToEnd("h", expect: .data(Data([2, 3])))
            .write("h", "x")
            .seek("h", to: 0)
            .seekToEnd("h", expect: .integer(4))
            .offset("h", expect: .integer(4))
            .size("h", expect: .integer(4))
            .truncate("h", to: 2)
            .sync("h")
            .close("h")
            .lock()
            .expect(.state(.locked))
            .expect(.available([.completeUntilFirstUserAuthentication]))
            .expect(.unavailable([.complete]))
            .expect(.protectedDataAvailable(false))
            .unlock("9", expect: .error(.incorrectPasscode))
            .expect(.failedAttempts(1))
            .reboot()
            .crash()
            .erase()
            .expect(.events([.protectedDataDidBecomeAvailable, .protectedDataWillBecomeUnavailable]))
            .run(using: Support.runner)
        #expect(result.passed, "\(result.summary)")
    }

    @Test("a failure points at the call of the failing step")
    func failureLocation() throws {
        let line = #line + 4
        let timeline = Timeline("fails at the get")
            .unlock()
            .put("a", "x")
            .get("a", expect: .text("y"))
            .lock()
        let result = timeline.run(using: Support.runner)
        let failure = try #require(result.failure)
        #expect(failure.location.line == line)
        #expect(failure.location.file == #fileID)
        #expect(failure.location.filePath == #filePath)
        #expect(failure.message == "expected \"y\", got \"x\"")
        #expect(result.summary == "FAIL fails at the get (\(#fileID):\(line)): expected \"y\", got \"x\"")
        #expect(failure.statement == "get a")
    }

    @Test("assertPasses records an issue at the failing step's line")
    func assertPassesRecordsAnIssue() {
        let line = #line + 4
        withKnownIssue {
            Timeline("locked get")
                .lock()
                .get("missing", expect: .text("x"))
                .assertPasses(using: Support.runner)
        } matching: { issue in
            issue.sourceLocation?.line == line && issue.sourceLocation?.fileID == #fileID
                && "\(issue)".contains("expected \"x\", got error fileNotFound")
        }
    }
}
