import Foundation
import Testing

/// Every store subcommand through the built binary: success paths, errors and exit statuses.
@Suite("dpctl store commands")
struct CommandTests {
    @Test("init creates the store with a passcode; a second init is fileExists (15)")
    func initTwice() throws {
        let fixture = try StoreFixture()
        let first = try fixture.run(["init"])
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput.contains("with a passcode"))
        let second = try fixture.run(["init"])
        #expect(second.status == 15)
        #expect(second.standardError.contains("dpctl: error: A store already exists"))
        #expect(second.standardError.contains("(fileExists)"))
        #expect(second.standardError.contains("dpctl: hint: "))
    }

    @Test("init without a passcode source and without a terminal fails at once and creates nothing")
    func initNeedsAPasscode() throws {
        let fixture = try StoreFixture()
        let result = try fixture.run(["init"], passcode: nil)
        #expect(result.status == 10)
        #expect(result.standardError.contains("standard input is not a terminal"))
        #expect(result.standardError.contains("DPCTL_PASSCODE"))
        #expect(!FileManager.default.fileExists(atPath: fixture.store.path))
        #expect(!FileManager.default.fileExists(atPath: fixture.stateHome.path))
    }

    @Test("init --no-passcode, and --store wins over DPCTL_STORE")
    func initWithoutPasscodeAndStoreOption() throws {
        let fixture = try StoreFixture()
        let other = fixture.directory.appendingPathComponent("other")
        #expect(try fixture.run(["init", "--no-passcode", "--store", other.path], passcode: nil).status == 0)
        #expect(FileManager.default.fileExists(atPath: other.appendingPathComponent(".dpstore").path))
        #expect(!FileManager.default.fileExists(atPath: fixture.store.path))
        let status = try fixture.run(["status", "--json", "--store", other.path], passcode: nil)
        #expect(try status.json()["passcodeSet"] as? Bool == false)
    }

    @Test("the store defaults to $XDG_DATA_HOME/dpctl")
    func xdgDefault() throws {
        let fixture = try StoreFixture()
        let data = fixture.directory.appendingPathComponent("xdg")
        var environment = ["XDG_DATA_HOME": data.path]
        environment["DPCTL_STORE"] = ""
        let result = try fixture.run(["init", "--no-passcode"], passcode: nil, extra: environment)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("dpctl/.dpstore").path))
    }

    @Test("a command on a missing store is fileNotFound (14) with a hint to run init")
    func missingStore() throws {
        let fixture = try StoreFixture()
        let result = try fixture.run(["ls"])
        #expect(result.status == 14)
        #expect(result.standardError.contains("(fileNotFound)"))
        #expect(result.standardError.contains("dpctl init"))
    }

    @Test("status prints state, passcode, failed attempts and next attempt; --json parses")
    func status() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let text = try fixture.run(["status"], passcode: nil)
        #expect(text.status == 0)
        for line in ["state: booted", "passcode set: yes", "failed attempts: 0", "next attempt allowed: now"] {
            #expect(text.standardOutput.contains(line), "missing \(line)")
        }
        let json = try fixture.run(["status", "--json"], passcode: nil).json()
        #expect(json["state"] as? String == "booted")
        #expect(json["passcodeSet"] as? Bool == true)
        #expect(json["failedAttempts"] as? Int == 0)
        #expect(json["nextAttemptAllowed"] is NSNull)
    }

    @Test("unlock: the right passcode succeeds; a wrong one is incorrectPasscode (11) and counted")
    func unlock() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        #expect(try fixture.run(["unlock"]).status == 0)
        let wrong = try fixture.run(["unlock"], passcode: "0000")
        #expect(wrong.status == 11)
        #expect(wrong.standardError.contains("dpctl: error: "))
        #expect(wrong.standardError.contains("(incorrectPasscode)"))
        #expect(try fixture.run(["status", "--json"]).json()["failedAttempts"] as? Int == 1)
        // A passcode file works too (one trailing newline removed).
        let file = try fixture.passcodeFile("passcode", Data("1234\n".utf8))
        #expect(try fixture.run(["unlock", "--passcode-file", file.path], passcode: nil).status == 0)
        #expect(try fixture.run(["status", "--json"]).json()["failedAttempts"] as? Int == 0)
    }

    @Test("put, get, cat: a complete file round trip; get of a missing file is fileNotFound (14)")
    func putGetCat() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("note.txt", Data("hello, protected world\n".utf8))
        let put = try fixture.run(["put", source.path, "Documents/note.txt", "--class", "complete"])
        #expect(put.status == 0, "\(put.standardError)")
        #expect(put.standardError.isEmpty, "no progress bar without a terminal")
        #expect(try fixture.run(["cat", "Documents/note.txt"]).standardOutput == "hello, protected world\n")
        #expect(try fixture.run(["get", "Documents/note.txt"]).standardOutput == "hello, protected world\n")
        let out = fixture.directory.appendingPathComponent("out.txt")
        #expect(try fixture.run(["get", "Documents/note.txt", "-o", out.path]).status == 0)
        #expect(try String(contentsOf: out, encoding: .utf8) == "hello, protected world\n")

        let missing = try fixture.run(["get", "Documents/nope.txt"])
        #expect(missing.status == 14)
        #expect(missing.standardError.contains("dpctl: error: "))
        #expect(missing.standardError.contains("(fileNotFound)"))
        let directory = try fixture.run(["get", "Documents"])
        #expect(directory.status == 17)
        #expect(directory.standardError.contains("(isADirectory)"))
        let local = try fixture.run(["put", fixture.directory.appendingPathComponent("absent").path, "x"])
        #expect(local.status == 14)
    }

    @Test("get of a complete file needs the passcode: without one and without a terminal, a clear error, not a hang")
    func getNeedsPasscode() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("secret", Data("secret".utf8))
        #expect(try fixture.run(["put", source.path, "secret", "--class", "complete"]).status == 0)
        let started = Date()
        let result = try fixture.run(["get", "secret"], passcode: nil)
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(result.status == 10)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("dpctl: error: A passcode is needed"))
        #expect(result.standardError.contains("(protectedDataUnavailable)"))
        #expect(result.standardError.contains("dpctl: hint: Set DPCTL_PASSCODE or pass --passcode-file"))
        let wrong = try fixture.run(["cat", "secret"], passcode: "9999")
        #expect(wrong.status == 11)
        #expect(wrong.standardError.contains("(incorrectPasscode)"))
        // The default class needs the passcode too (the device has just booted).
        #expect(try fixture.run(["put", source.path, "default"]).status == 0)
        #expect(try fixture.run(["cat", "default"], passcode: nil).status == 10)
    }

    @Test("class none and completeUnlessOpen puts, and metadata commands, never ask for the passcode")
    func noPasscodeNeeded() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("data", Data("open data".utf8))
        #expect(try fixture.run(["put", source.path, "public.txt", "--class", "none"], passcode: nil).status == 0)
        #expect(try fixture.run(["cat", "public.txt"], passcode: nil).standardOutput == "open data")
        let inbox = try fixture.run(["put", source.path, "inbox/mail", "--class", "completeUnlessOpen"], passcode: nil)
        #expect(inbox.status == 0, "\(inbox.standardError)")
        // Reading it back needs the class B secret key.
        #expect(try fixture.run(["cat", "inbox/mail"], passcode: nil).status == 10)
        #expect(try fixture.run(["cat", "inbox/mail"]).standardOutput == "open data")
        // A new file in a `none` directory is `none`.
        #expect(try fixture.run(["mkdir", "open", "--class", "none"], passcode: nil).status == 0)
        #expect(try fixture.run(["put", source.path, "open/a"], passcode: nil).status == 0)
        for arguments in [["ls"], ["ls", "-l", "inbox"], ["stat", "inbox/mail"], ["mkdir", "-p", "a/b/c"],
                          ["mv", "public.txt", "a/public.txt"], ["rm", "a/public.txt"], ["status"]] {
            let result = try fixture.run(arguments, passcode: nil)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
        }
        #expect(try fixture.run(["status", "--json"]).json()["failedAttempts"] as? Int == 0)
    }

    @Test("ls and stat, text and --json")
    func listAndStat() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("data", Data("12345".utf8))
        #expect(try fixture.run(["put", source.path, "Docs/b.txt", "--class", "complete"]).status == 0)
        #expect(try fixture.run(["put", source.path, "Docs/a.txt", "--class", "none"]).status == 0)
        #expect(try fixture.run(["mkdir", "Docs/sub"]).status == 0)
        #expect(try fixture.run(["ls"]).standardOutput == "Docs/\n")
        #expect(try fixture.run(["ls", "Docs"]).standardOutput == "a.txt\nb.txt\nsub/\n")
        let long = try fixture.run(["ls", "-l", "Docs"]).standardOutput
        #expect(long.contains("complete") && long.contains("5  b.txt"))
        let listing = try fixture.run(["ls", "--json", "Docs"]).json()
        let entries = try #require(listing["entries"] as? [[String: Any]])
        #expect(entries.map { $0["name"] as? String } == ["a.txt", "b.txt", "sub"])
        #expect(entries[1]["protectionClass"] as? String == "complete")
        #expect(entries[1]["size"] as? Int == 5)
        #expect(entries[2]["type"] as? String == "directory")

        let stat = try fixture.run(["stat", "--json", "Docs/b.txt"]).json()
        #expect(stat["type"] as? String == "file")
        #expect(stat["size"] as? Int == 5)
        #expect(stat["protectionClass"] as? String == "complete")
        #expect(stat["creationDate"] is String)
        #expect(try fixture.run(["stat", "Docs/b.txt"]).standardOutput.contains("class: complete"))

        let notDirectory = try fixture.run(["ls", "Docs/b.txt"])
        #expect(notDirectory.status == 16)
        #expect(notDirectory.standardError.contains("(notADirectory)"))
        #expect(try fixture.run(["stat", "nope"]).status == 14)
        let invalid = try fixture.run(["stat", "a/../b"])
        #expect(invalid.status == 22)
        #expect(invalid.standardError.contains("(invalidPath)"))
    }

    @Test("mkdir, mv, rm, cp, set-class and their errors")
    func itemCommands() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("data", Data("payload".utf8))
        #expect(try fixture.run(["put", source.path, "f", "--class", "complete"]).status == 0)

        #expect(try fixture.run(["mkdir", "d"]).status == 0)
        let again = try fixture.run(["mkdir", "d"])
        #expect(again.status == 15 && again.standardError.contains("(fileExists)"))
        let noParent = try fixture.run(["mkdir", "x/y"])
        #expect(noParent.status == 14)
        #expect(try fixture.run(["mkdir", "-p", "x/y"]).status == 0)

        #expect(try fixture.run(["cp", "f", "d/copy"]).status == 0)
        #expect(try fixture.run(["cat", "d/copy"]).standardOutput == "payload")
        #expect(try fixture.run(["cp", "f", "d/open", "--class", "none"]).status == 0)
        #expect(try fixture.run(["stat", "--json", "d/open"]).json()["protectionClass"] as? String == "none")
        #expect(try fixture.run(["cp", "f", "d/copy2"], passcode: nil).status == 10)
        #expect(try fixture.run(["cp", "f", "d/copy"]).status == 15)

        #expect(try fixture.run(["mv", "d/copy", "moved"], passcode: nil).status == 0)
        #expect(try fixture.run(["mv", "moved", "f"], passcode: nil).status == 15)
        #expect(try fixture.run(["mv", "nope", "z"], passcode: nil).status == 14)
        // As mv(1): an existing directory, or a trailing `/`, means "inside it".
        #expect(try fixture.run(["mv", "moved", "x"], passcode: nil).status == 0)
        #expect(try fixture.run(["stat", "x/moved"], passcode: nil).status == 0)
        #expect(try fixture.run(["mv", "x/moved", "x/y/"], passcode: nil).status == 0)
        #expect(try fixture.run(["cat", "x/y/moved"]).standardOutput == "payload")
        #expect(try fixture.run(["mv", "x/y/moved", "nowhere/"], passcode: nil).status == 14)
        #expect(try fixture.run(["mv", "x/y/moved", "moved"], passcode: nil).status == 0)

        let notEmpty = try fixture.run(["rm", "d"], passcode: nil)
        #expect(notEmpty.status == 18)
        #expect(notEmpty.standardError.contains("(directoryNotEmpty)"))
        #expect(try fixture.run(["rm", "d/open"], passcode: nil).status == 0)
        #expect(try fixture.run(["rm", "d"], passcode: nil).status == 0)
        #expect(try fixture.run(["rm", "d"], passcode: nil).status == 14)

        #expect(try fixture.run(["set-class", "none", "moved"]).status == 0)
        #expect(try fixture.run(["cat", "moved"], passcode: nil).standardOutput == "payload")
        // From none to completeUnlessOpen needs no key; back to complete needs the passcode.
        #expect(try fixture.run(["set-class", "completeUnlessOpen", "moved"], passcode: nil).status == 0)
        #expect(try fixture.run(["set-class", "complete", "moved"], passcode: nil).status == 10)
        #expect(try fixture.run(["set-class", "complete", "moved"]).status == 0)
        #expect(try fixture.run(["stat", "--json", "moved"]).json()["protectionClass"] as? String == "complete")
        let badClass = try fixture.run(["set-class", "secret", "moved"])
        #expect(badClass.status == 64)
    }

    @Test("passcode set, change and remove")
    func passcodes() throws {
        let fixture = try StoreFixture()
        try fixture.initialize(passcode: nil)
        let source = try fixture.localFile("data", Data("kept".utf8))
        #expect(try fixture.run(["put", source.path, "f", "--class", "complete"], passcode: nil).status == 0)
        #expect(try fixture.run(["cat", "f"], passcode: nil).standardOutput == "kept")

        #expect(try fixture.run(["passcode", "set"], passcode: "1111").status == 0)
        #expect(try fixture.run(["passcode", "set"], passcode: "2222").status == 15)
        #expect(try fixture.run(["cat", "f"], passcode: nil).status == 10)
        #expect(try fixture.run(["cat", "f"], passcode: "1111").standardOutput == "kept")

        let noNew = try fixture.run(["passcode", "change"], passcode: "1111")
        #expect(noNew.status == 10, "no new passcode and no terminal")
        let wrongOld = try fixture.run(["passcode", "change"], passcode: "0000", extra: ["DPCTL_NEW_PASSCODE": "2222"])
        #expect(wrongOld.status == 11)
        let newFile = try fixture.passcodeFile("new", Data("2222\n".utf8))
        let change = try fixture.run(["passcode", "change", "--new-passcode-file", newFile.path], passcode: "1111")
        #expect(change.status == 0, "\(change.standardError)")
        #expect(try fixture.run(["cat", "f"], passcode: "1111").status == 11)
        #expect(try fixture.run(["cat", "f"], passcode: "2222").standardOutput == "kept")

        #expect(try fixture.run(["passcode", "remove"], passcode: "2222").status == 0)
        #expect(try fixture.run(["cat", "f"], passcode: nil).standardOutput == "kept")
        #expect(try fixture.run(["passcode", "remove"], passcode: nil).status == 23)
    }

    @Test("erase needs --yes (usage error 64), then leaves an empty store without a passcode")
    func erase() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("data", Data("gone".utf8))
        #expect(try fixture.run(["put", source.path, "f"]).status == 0)
        let unconfirmed = try fixture.run(["erase"])
        #expect(unconfirmed.status == 64)
        #expect(try fixture.run(["ls"]).standardOutput == "f\n")
        #expect(try fixture.run(["mkdir", "dir"]).status == 0)
        #expect(try fixture.run(["put", source.path, "dir/g", "--class", "none"]).status == 0)
        let erased = try fixture.run(["erase", "--yes"], passcode: nil)
        #expect(erased.status == 0, "\(erased.standardError)")
        let listed = try fixture.run(["ls"])
        #expect(listed.status == 0, "\(listed.standardError)")
        #expect(listed.standardOutput == "")
        // Removed from the disk, not only from the listing: the data directory holds its metadata alone.
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: fixture.store.path).sorted()
        #expect(onDisk == [".dpstore", "dpdir"], "\(onDisk)")
        let status = try fixture.run(["status", "--json"])
        #expect(status.status == 0)
        #expect(try status.json()["passcodeSet"] as? Bool == false)
        // The erased store is a working one.
        #expect(try fixture.run(["put", source.path, "again"], passcode: nil).status == 0)
        let again = try fixture.run(["cat", "again"], passcode: nil)
        #expect(again.status == 0 && again.standardOutput == "gone")
    }

    @Test("usage errors exit 64")
    func usage() throws {
        let fixture = try StoreFixture()
        #expect(try fixture.run(["put"]).status == 64)
        #expect(try fixture.run(["get", "a", "--bogus"]).status == 64)
        #expect(try fixture.run(["put", "a", "b", "--class", "nope"]).status == 64)
    }
}

@Suite("dpctl passcode attempts and terminals")
struct PasscodeAttemptTests {
    @Test("existence errors come before the passcode: put onto a directory, cp onto a file")
    func existenceFirst() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("data", Data("x".utf8))
        #expect(try fixture.run(["mkdir", "dir"], passcode: nil).status == 0)
        #expect(try fixture.run(["put", source.path, "f", "--class", "complete"]).status == 0)
        let put = try fixture.run(["put", source.path, "dir"], passcode: nil)
        #expect(put.status == 17 && put.standardError.contains("(isADirectory)"))
        #expect(try fixture.run(["cp", "f", "dir"], passcode: nil).status == 15)
        #expect(try fixture.run(["cp", "nope", "g"], passcode: nil).status == 14)
    }

    @Test("the fifth failure starts a 1 min delay: passcodeAttemptsDelayed (12), shown by status")
    func throttling() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        for attempt in 1...5 {
            let result = try fixture.run(["unlock"], passcode: "000\(attempt)")
            #expect(result.status == 11)
        }
        let delayed = try fixture.run(["cat", "anything-missing"], passcode: "1234")
        #expect(delayed.status == 14, "existence first, no attempt needed")
        let source = try fixture.localFile("data", Data("x".utf8))
        let refused = try fixture.run(["put", source.path, "f"], passcode: "1234")
        #expect(refused.status == 12)
        #expect(refused.standardError.contains("(passcodeAttemptsDelayed)"))
        let status = try fixture.run(["status", "--json"]).json()
        #expect(status["failedAttempts"] as? Int == 5)
        #expect(status["nextAttemptAllowed"] is String)
        #expect(try fixture.run(["status"]).standardOutput.contains("next attempt allowed: 20"))
        // Class none still works during the delay.
        #expect(try fixture.run(["put", source.path, "open", "--class", "none"], passcode: nil).status == 0)
    }

    @Test("on a terminal the passcode is asked with echo off (via script(1), when present)")
    func terminalPrompt() throws {
        // util-linux's script(1) (`-qec`); BSD's takes other options.
        #if !os(Linux)
        return
        #else
        let script = "/usr/bin/script"
        guard FileManager.default.isExecutableFile(atPath: script) else { return }
        let fixture = try StoreFixture()
        try fixture.initialize()
        let source = try fixture.localFile("data", Data("from the terminal".utf8))
        #expect(try fixture.run(["put", source.path, "f", "--class", "complete"]).status == 0)
        // Type the passcode once the prompt is up.
        let typing = Process()
        typing.executableURL = URL(fileURLWithPath: "/bin/sh")
        let command = "'\(DPCtlRunner.executable.path)' cat f"
        typing.arguments = ["-c", "(sleep 1; printf '1234\\n') | \(script) -qec \"\(command)\" /dev/null"]
        typing.environment = fixture.environment(passcode: nil)
        let output = Pipe()
        typing.standardOutput = output
        typing.standardError = FileHandle.nullDevice
        try typing.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        typing.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        #expect(typing.terminationStatus == 0, "\(text)")
        #expect(text.contains("Passcode: "))
        #expect(text.contains("from the terminal"))
        #expect(!text.contains("1234"), "the passcode was echoed: \(text)")
        #endif
    }
}
