import Foundation
import Testing

/// Where decrypted bytes go: `get -o` onto every kind of path, modes whatever
/// the umask, write errors and closed pipes (issue 15, "Output files and permissions").
@Suite("dpctl output files and permissions")
struct OutputFileTests {
    /// Runs `dpctl` through `sh -c` so that `umask` and the standard output's target can be set
    /// for the child alone; standard output goes to `stdout` (a shell redirection target).
    static func shell(_ fixture: StoreFixture, umask: String = "022", _ arguments: [String],
                      stdout: String = "/dev/null", extra: [String: String] = [:]) throws -> DPCtlRunner.Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "umask \(umask) && exec \"$0\" \"$@\" > '\(stdout)'", DPCtlRunner.executable.path] + arguments
        process.environment = fixture.environment(passcode: "1234", extra: extra)
        let error = Pipe()
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return DPCtlRunner.Result(status: process.terminationStatus, standardOutput: "",
                                  standardError: String(decoding: errorData, as: UTF8.self))
    }

    static func mode(_ url: URL) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int)
    }

    static func type(_ url: URL) throws -> FileAttributeType? {
        try FileManager.default.attributesOfItem(atPath: url.path)[.type] as? FileAttributeType
    }

    /// A store with `f` (class none, 2 MiB), and its content.
    static func prepared() throws -> (StoreFixture, Data) {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let data = deterministicBytes(count: 2 << 20 + 3)
        let input = try fixture.localFile("input.bin", data)
        let put = try fixture.run(["put", input.path, "f", "--class", "none"])
        precondition(put.status == 0, put.standardError)
        return (fixture, data)
    }

    @Test("get -o makes a new output 0600 even under umask 0; a replaced file keeps its mode")
    func outputModes() throws {
        let (fixture, data) = try Self.prepared()
        let output = fixture.directory.appendingPathComponent("new.bin")
        let created = try Self.shell(fixture, umask: "000", ["get", "f", "-o", output.path])
        #expect(created.status == 0, "\(created.standardError)")
        #expect(try Self.mode(output) == 0o600)
        #expect(try Data(contentsOf: output) == data)

        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: output.path)
        let replaced = try Self.shell(fixture, umask: "000", ["get", "f", "-o", output.path])
        #expect(replaced.status == 0)
        #expect(try Self.mode(output) == 0o640, "the replaced file's mode is kept")
    }

    @Test("get -o through a symbolic link writes its target and leaves the link a link")
    func outputThroughLink() throws {
        let (fixture, data) = try Self.prepared()
        let target = fixture.directory.appendingPathComponent("target.bin")
        let link = fixture.directory.appendingPathComponent("link.bin")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        let get = try fixture.run(["get", "f", "-o", link.path])
        #expect(get.status == 0, "\(get.standardError)")
        #expect(try Self.type(link) == .typeSymbolicLink)
        #expect(try Data(contentsOf: target) == data)
        #expect(try Self.mode(target) == 0o600)
    }

    @Test("get -o onto a FIFO writes into it in place: the reader gets every byte and the FIFO stays a FIFO")
    func outputIntoFIFO() throws {
        let (fixture, data) = try Self.prepared()
        let fifo = fixture.directory.appendingPathComponent("fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        nonisolated(unsafe) var received = Data()
        let reader = Thread {
            if let handle = FileHandle(forReadingAtPath: fifo.path) { received = handle.readDataToEndOfFile() }
        }
        reader.start()
        let get = try fixture.run(["get", "f", "-o", fifo.path])
        // Bounded: had dpctl replaced the FIFO by a file, the reader would wait for a writer forever.
        let deadline = Date().addingTimeInterval(20)
        while !reader.isFinished && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(reader.isFinished, "the FIFO's reader never got an end of file")
        #expect(get.status == 0, "\(get.standardError)")
        #expect(received == data)
        var status = stat()
        #expect(lstat(fifo.path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFIFO)
    }

    @Test("get -o onto a link another user planted in a sticky directory is refused by the kernel (notPermitted, 20): nothing reaches the other user's file",
          .enabled(if: LocalUsers.available, "needs root, useradd and setpriv to run as two real users"))
    func plantedLinkInStickyDirectory() throws {
        let victim = try LocalUsers.Victim.create()
        defer { victim.remove() }
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("dpctl-sticky-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let home = base.appendingPathComponent("victim"), attackerHome = base.appendingPathComponent("nobody")
        let shared = base.appendingPathComponent("shared")
        let layout: [(URL, uid_t, gid_t, mode_t)] = [(base, 0, 0, 0o755), (home, victim.uid, victim.gid, 0o700),
                                                      (attackerHome, LocalUsers.attacker.uid, LocalUsers.attacker.gid, 0o777),
                                                      (shared, 0, 0, 0o1777)]
        for (directory, user, group, mode) in layout {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            #expect(chown(directory.path, user, group) == 0 && chmod(directory.path, mode) == 0)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        environment["XDG_STATE_HOME"] = home.appendingPathComponent("state").path
        environment["XDG_RUNTIME_DIR"] = nil
        environment["DPCTL_STORE"] = home.appendingPathComponent("store").path
        environment["DPCTL_PASSCODE"] = "1234"
        func asVictim(_ arguments: [String]) throws -> DPCtlRunner.Result {
            try DPCtlRunner.run(arguments, fullEnvironment: environment, wrapper: victim.wrapper)
        }
        let secret = Data("complete plaintext of the victim\n".utf8)
        let input = home.appendingPathComponent("c.txt")
        try secret.write(to: input)
        #expect(chown(input.path, victim.uid, victim.gid) == 0)
        for arguments in [["init"], ["put", input.path, "Docs/c.txt", "--class", "complete"]] {
            let result = try asVictim(arguments)
            try #require(result.status == 0, "\(arguments): \(result.standardError)")
        }
        let nobody = LocalUsers.wrapper(uid: LocalUsers.attacker.uid, gid: LocalUsers.attacker.gid)
        let loot = attackerHome.appendingPathComponent("loot"), link = shared.appendingPathComponent("report.txt")
        #expect(try LocalUsers.run("/bin/sh", ["-c", "umask 0 && : > '\(loot.path)' && ln -s '\(loot.path)' '\(link.path)'"],
                                   wrapper: nobody).status == 0)
        let planted = shared.appendingPathComponent("planted.txt")
        #expect(try LocalUsers.run("/bin/sh", ["-c", "umask 0 && : > '\(planted.path)'"], wrapper: nobody).status == 0)

        try LocalUsers.withSysctl("fs.protected_symlinks", "1") { isSet in
            // Without the kernel's rule (a read-only /proc/sys), dpctl's own check of the owner must still refuse.
            if !isSet { print("fs.protected_symlinks cannot be set here: the link is followed, and only dpctl's owner check is tested") }
            let throughLink = try asVictim(["get", "Docs/c.txt", "-o", link.path])
            #expect(throughLink.status == 20, "\(throughLink.standardError)")
            #expect(throughLink.standardError.contains("report.txt"), "\(throughLink.standardError)")
            let intoTheirs = try asVictim(["get", "Docs/c.txt", "-o", planted.path])
            #expect(intoTheirs.status == 20, "\(intoTheirs.standardError)")
        }
        // Nothing of the plaintext anywhere nobody can read: its directory, the shared one.
        for directory in [attackerHome, shared] {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                let contents = (try? Data(contentsOf: directory.appendingPathComponent(name))) ?? Data()
                #expect(contents.range(of: Data("complete plaintext".utf8)) == nil, "\(name) holds the plaintext")
            }
        }
        var status = stat()
        #expect(lstat(loot.path, &status) == 0 && status.st_uid == LocalUsers.attacker.uid && status.st_size == 0)
        #expect(lstat(planted.path, &status) == 0 && status.st_uid == LocalUsers.attacker.uid && status.st_size == 0)
        // The victim's own output in its own directory is still written.
        let own = home.appendingPathComponent("out.txt")
        let written = try asVictim(["get", "Docs/c.txt", "-o", own.path])
        #expect(written.status == 0, "\(written.standardError)")
        #expect(try Data(contentsOf: own) == secret)
    }

    @Test("get -o onto a directory is isADirectory (17) and writes nothing")
    func outputOntoDirectory() throws {
        let (fixture, _) = try Self.prepared()
        let before = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).sorted()
        let get = try fixture.run(["get", "f", "-o", fixture.directory.path])
        #expect(get.status == 17, "\(get.standardError)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).sorted() == before)
    }

    @Test("a full device: cat and get -o fail with ioFailure (24) and a dpctl error line, small file or large",
          arguments: [100, 2 << 20 + 3])
    func fullDevice(_ size: Int) throws {
        guard FileManager.default.fileExists(atPath: "/dev/full") else { return }
        let fixture = try StoreFixture()
        try fixture.initialize()
        let input = try fixture.localFile("input.bin", deterministicBytes(count: size))
        #expect(try fixture.run(["put", input.path, "f", "--class", "none"]).status == 0)
        let cat = try Self.shell(fixture, ["cat", "f"], stdout: "/dev/full")
        #expect(cat.status == 24, "\(cat.standardError)")
        #expect(cat.standardError.hasPrefix("dpctl: error: Cannot write to standard output"), "\(cat.standardError)")
        #expect(cat.standardError.contains("(ioFailure)"))
        #expect(!cat.standardError.contains("NSCocoaErrorDomain"))
    }

    @Test("a closed pipe (cat big | head -c 10) ends quietly with status 0")
    func closedPipe() throws {
        let (fixture, _) = try Self.prepared()
        let result = try DPCtlRunner.readingThenClosing(10, ["cat", "f"], environment: fixture.environment(passcode: "1234"))
        #expect(result.read == 10)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty, "\(result.standardError)")
    }

    @Test("under umask 0, no directory or file dpctl makes is writable by group or others: the state and data directories' parents included")
    func umaskZeroParents() throws {
        let fixture = try StoreFixture()
        let extra = ["XDG_STATE_HOME": fixture.directory.appendingPathComponent("home/.local/state").path,
                     "DPCTL_STORE": fixture.directory.appendingPathComponent("data/deeper/store").path]
        let input = try fixture.localFile("input.txt", Data("x".utf8))
        for arguments in [["init"], ["put", input.path, "Docs/a.txt"], ["mkdir", "Docs/b"]] {
            let result = try Self.shell(fixture, umask: "000", arguments, extra: extra)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
        }
        var open: [String] = []
        let walker = FileManager.default.enumerator(atPath: fixture.directory.path)
        while let relative = walker?.nextObject() as? String {
            var status = stat()
            let path = fixture.directory.appendingPathComponent(relative).path
            if lstat(path, &status) == 0, status.st_mode & S_IFMT != S_IFLNK, status.st_mode & 0o022 != 0 {
                open.append("\(relative) \(String(status.st_mode & 0o7777, radix: 8))")
            }
        }
        #expect(open.isEmpty, "paths others may write to: \(open)")
    }

    @Test("the store directory is 0700 under umask 0; an existing one others can write to is refused (23) with a hint")
    func storeDirectoryModes() throws {
        let fixture = try StoreFixture()
        let created = try Self.shell(fixture, umask: "000", ["init", "--no-passcode"])
        #expect(created.status == 0, "\(created.standardError)")
        #expect(try Self.mode(fixture.store) == 0o700)
        let device = try #require(try fixture.run(["status", "--json"], passcode: nil).json()["device"] as? String)
        #expect(try Self.mode(URL(fileURLWithPath: device)) == 0o700)

        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: fixture.store.path)
        let refused = try fixture.run(["ls"])
        #expect(refused.status == 23, "\(refused.standardError)")
        #expect(refused.standardError.contains("can be written by other users"))
        #expect(refused.standardError.contains("dpctl: hint: Restrict it to its owner"))
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: fixture.store.path)
        #expect(try fixture.run(["ls"]).status == 0)
    }
}
