import Foundation
import Testing

@Suite("dpctl demo")
struct DemoTests {
    @Test("the demo runs to the end and narrates every rule it shows")
    func demoRunsToTheEnd() throws {
        let result = try DPCtlRunner.run(["demo"])
        #expect(result.status == 0, "stderr: \(result.standardError)")
        let output = result.standardOutput
        for expected in [
            "state: booted; isProtectedDataAvailable: false",
            "events: protectedDataDidBecomeAvailable, protectedDataWillBecomeUnavailable",
            // Inside the grace period everything is still available; after it class A and B are not.
            "t+5 s, inside the grace period:\n   read Documents/complete.txt: ok",
            "unavailable: complete, completeUnlessOpen\n",
            "read Documents/complete.txt: protectedDataUnavailable",
            "read Documents/completeUnlessOpen.txt: protectedDataUnavailable",
            "read Documents/completeUntilFirstUserAuthentication.txt: ok",
            "read Documents/none.txt: ok",
            "write through the open complete handle: protectedDataUnavailable",
            "write through the open completeUnlessOpen handle: ok",
            "create and write a new completeUnlessOpen file while locked: ok",
            "create a new complete file while locked: protectedDataUnavailable",
            "reopen the completeUnlessOpen file once closed: protectedDataUnavailable",
            "read Documents/completeWhenUserInactive.txt: protectedDataUnavailable",
            "the same complete handle works again: ok",
            "Documents/diary.txt: \"dear diary, written after unlock\"",
            "Documents/upload.part: \"part 1; part 2\"",
            "files left: 0",
            "unlock 0005: incorrectPasscode, 5 failed; next attempt in 1 min",
            "unlock 0006: passcodeAttemptsDelayed, 5 failed",
            "unlock 0006: incorrectPasscode, 6 failed; next attempt in 5 min",
            "unlock 1234: ok (state unlocked)",
            "10 failed passcode attempts: the device was erased.",
            "after erase: state booted, passcode set: false, failed attempts: 0",
        ] {
            #expect(output.contains(expected), "missing: \(expected)")
        }
        #expect(!output.contains("DataProtection.Device:"), "library log lines leaked to stdout")
    }

    @Test("the demo removes its temporary device")
    func demoCleansUp() throws {
        let result = try DPCtlRunner.run(["demo"])
        let firstLine = try #require(result.standardOutput.split(separator: "\n").first)
        let path = try #require(firstLine.split(separator: " ").last)
        #expect(!FileManager.default.fileExists(atPath: String(path)))
    }

    @Test("an unknown subcommand is a usage error")
    func unknownSubcommand() throws {
        let result = try DPCtlRunner.run(["frobnicate"])
        #expect(result.status == 64)
        #expect(result.standardError.contains("Error:"))
    }
}
