import TestSupport
import Foundation
import Testing

/// Whether the clients are installed (`.ci/setup`: dbus, libsecret-tools, python3-secretstorage).
enum SecretServiceClients {
    static var available: Bool {
        ["/usr/bin/dbus-daemon", "/usr/bin/secret-tool", "/usr/bin/dbus-monitor", "/usr/bin/python3"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        } && FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/secretstorage")
    }
}

/// The Secret Service provider (`dpctl agent start --secret-service`) with real clients on a
/// private session bus: `secret-tool` (libsecret, dh-ietf1024-sha256-aes128-cbc-pkcs7) and
/// python3-secretstorage forced to each algorithm, the lock state as clients see it, a
/// restart, the disk, and a second provider refused.
@Suite("Secret Service provider", .serialized, .enabled(if: SecretServiceClients.available,
                                                       "needs dbus-daemon, secret-tool, dbus-monitor and Debian's python3 with secretstorage"))
struct SecretServiceTests {
    /// What a client process did.
    struct Outcome {
        var status: Int32
        var output: Data
        var error: String
        var text: String { String(decoding: output, as: UTF8.self) }
    }

    /// Runs `program` with `arguments` in `environment`, feeding `input`.
    static func client(_ program: String, _ arguments: [String], input: Data = Data(), environment: [String: String]) throws -> Outcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        nonisolated(unsafe) var errorData = Data()
        let errorReader = Thread { errorData = stderr.fileHandleForReading.readDataToEndOfFile() }
        errorReader.start()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errorReader.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        return Outcome(status: process.terminationStatus, output: output, error: String(decoding: errorData, as: UTF8.self))
    }

    /// Every regular file under `directory` that holds `needle`.
    static func files(under directory: URL, containing needle: Data) -> [String] {
        guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
        var found: [String] = []
        for case let url as URL in walker {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true,
                  let data = try? Data(contentsOf: url), data.range(of: needle) != nil else { continue }
            found.append(url.path)
        }
        return found
    }

    @Test("secret-tool store/lookup/search/clear over dh, python3-secretstorage over plain and dh, lock state, restart, disk, a second provider refused")
    func realClients() throws {
        let bus = try SessionBusFixture(system: false, session: true)
        let busEnvironment = ["DBUS_SESSION_BUS_ADDRESS": bus.sessionAddress]
        let options = ["--auto-lock", "never", "--grace", "0s", "--secret-service"]
        let agent = try AgentCommandTests.AgentFixture(options, extra: busEnvironment)
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        let environment = agent.fixture.environment(passcode: "1234", extra: busEnvironment)
        func secretTool(_ arguments: [String], input: Data = Data()) throws -> Outcome {
            try Self.client("/usr/bin/secret-tool", arguments, input: input, environment: environment)
        }

        // secret-tool round trip, watched on the bus: libsecret opens a dh session, and the
        // secret never crosses the bus in the clear.
        let monitor = Process()
        monitor.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        monitor.arguments = ["--address", bus.sessionAddress, "--binary"]
        let capture = Pipe()
        monitor.standardOutput = capture
        monitor.standardError = FileHandle.nullDevice
        try monitor.run()
        Thread.sleep(forTimeInterval: 0.3)
        let toolSecret = Data("correct horse battery staple \(UUID().uuidString)".utf8)
        let stored = try secretTool(["store", "--label=mail password", "service", "mail.example", "account", "ann"], input: toolSecret)
        #expect(stored.status == 0, "\(stored.error)")
        let lookup = try secretTool(["lookup", "service", "mail.example", "account", "ann"])
        #expect(lookup.status == 0, "\(lookup.error)")
        #expect(lookup.output == toolSecret)
        kill(monitor.processIdentifier, SIGKILL)
        let captured = capture.fileHandleForReading.readDataToEndOfFile()
        monitor.waitUntilExit()
        #expect(captured.range(of: Data("dh-ietf1024-sha256-aes128-cbc-pkcs7".utf8)) != nil, "secret-tool did not open a dh session")
        #expect(captured.range(of: Data("CreateItem".utf8)) != nil && captured.range(of: Data("GetSecrets".utf8)) != nil)
        #expect(captured.range(of: toolSecret) == nil, "the secret crossed the bus in the clear")

        let search = try secretTool(["search", "--all", "service", "mail.example"])
        #expect(search.status == 0, "\(search.error)")
        #expect(search.text.contains("label = mail password"))
        // secret-tool prints the attributes on standard error.
        #expect(search.error.contains("attribute.account = ann") && search.error.contains("attribute.service = mail.example"))
        #expect(search.text.contains("secret = \(String(decoding: toolSecret, as: UTF8.self))"))
        // The item is a keychain item like any other (whenUnlocked).
        let listed = try agent.run(["item", "ls", "--json"])
        #expect(listed.status == 0 && listed.standardOutput.contains("mail.example") && listed.standardOutput.contains("whenUnlocked"))

        // python3-secretstorage, each algorithm forced: create, search, read, is_locked()
        // through `dpctl lock` and `dpctl unlock`, delete.
        let script = agent.fixture.directory.appendingPathComponent("secretstorage-client.py")
        try Self.pythonClient.write(to: script, atomically: true, encoding: .utf8)
        for algorithm in ["plain", "dh"] {
            let python = try Self.client("/usr/bin/python3", [script.path, algorithm], environment: environment.merging(
                ["DPCTL_BINARY": DPCtlRunner.executable.path]) { $1 })
            #expect(python.status == 0, "\(algorithm): \(python.error)")
            let seen = try #require(try JSONSerialization.jsonObject(with: python.output) as? [String: Any], "\(algorithm): \(python.text)")
            #expect(seen["session_encrypted"] as? Bool == (algorithm == "dh"))
            #expect(seen["found"] as? Int == 1)
            #expect((seen["sessions_used"] as? [String])?.count == 1, "the client used another session than the one forced")
            #expect(seen["secret_ok"] as? Bool == true)
            #expect(seen["label"] as? String == "py \(algorithm)")
            #expect(seen["attributes"] as? [String: String] == ["app": "py", "alg": algorithm])
            #expect(seen["relabeled"] as? String == "renamed \(algorithm)")
            #expect(seen["reattributed"] as? [String: String] == ["app": "py", "alg": algorithm, "xdg:schema": "org.example.Test"])
            #expect(seen["secret_after_close"] as? String == "org.freedesktop.Secret.Error.NoSession")
            #expect(seen["locked_before"] as? [Bool] == [false, false])
            #expect(seen["locked_after_lock"] as? [Bool] == [true, true])
            #expect(seen["found_while_locked"] as? Int == 0)
            #expect(seen["secret_while_locked"] as? String == "LockedException")
            #expect(seen["locked_after_unlock"] as? [Bool] == [false, false])
            #expect(seen["secret_after_unlock"] as? Bool == true)
            #expect(seen["found_after_delete"] as? Int == 0)
        }

        // After `dpctl lock` (grace 0): the whenUnlocked item is not returned, an
        // afterFirstUnlock one is.
        let afuSecret = Data("after first unlock \(UUID().uuidString)".utf8)
        let afuFile = FileManager.default.temporaryDirectory.appendingPathComponent("afu-\(UUID().uuidString)")
        try afuSecret.write(to: afuFile)
        let added = try agent.run(["item", "add", "--service", "afu.example", "--account", "ann", "--accessibility", "afterFirstUnlock"], input: afuFile)
        try? FileManager.default.removeItem(at: afuFile)
        #expect(added.status == 0, "\(added.standardError)")
        #expect(try agent.run(["lock"]).status == 0)
        let lockedLookup = try secretTool(["lookup", "service", "mail.example", "account", "ann"])
        #expect(lockedLookup.status != 0 && lockedLookup.output.isEmpty)
        let afuLookup = try secretTool(["lookup", "service", "afu.example", "account", "ann"])
        #expect(afuLookup.status == 0, "\(afuLookup.error)")
        #expect(afuLookup.output == afuSecret)

        // The items persist across an agent restart.
        #expect(try agent.run(["agent", "stop"]).status == 0)
        try agent.start(options)
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        #expect(try secretTool(["lookup", "service", "mail.example", "account", "ann"]).output == toolSecret)

        // A second provider on the same bus is refused, naming the owner.
        let other = try StoreFixture()
        try other.initialize()
        let refused = try other.run(["agent", "start"] + options, extra: busEnvironment)
        #expect(refused.status == 25, "\(refused.standardError)")
        #expect(refused.standardError.contains("org.freedesktop.secrets is owned by :1."))
        #expect(refused.standardError.contains("pid \(agent.pid)"))

        // clear removes it.
        #expect(try secretTool(["clear", "service", "mail.example", "account", "ann"]).status == 0)
        #expect(try secretTool(["lookup", "service", "mail.example", "account", "ann"]).status != 0)

        // Nothing of any secret in the clear on disk (the store, the device directory, everything of the fixture).
        #expect(try agent.run(["agent", "stop"]).status == 0)
        for secret in [toolSecret, afuSecret, Data("py-secret-plain".utf8), Data("py-secret-dh".utf8)] {
            #expect(Self.files(under: agent.fixture.directory, containing: secret).isEmpty)
        }
    }

    @Test("Unlock of the locked collection returns a prompt that completes when dpctl unlock unlocks the device; Dismiss ends one")
    func unlockPrompt() throws {
        let bus = try SessionBusFixture(system: false, session: true)
        let busEnvironment = ["DBUS_SESSION_BUS_ADDRESS": bus.sessionAddress]
        let agent = try AgentCommandTests.AgentFixture(["--auto-lock", "never", "--grace", "0s", "--secret-service"], extra: busEnvironment)
        defer { agent.stop() }
        let script = agent.fixture.directory.appendingPathComponent("prompt-client.py")
        try Self.promptClient.write(to: script, atomically: true, encoding: .utf8)
        let environment = agent.fixture.environment(passcode: "1234", extra: busEnvironment.merging(["DPCTL_BINARY": DPCtlRunner.executable.path]) { $1 })
        // Never unlocked yet: the collection is locked.
        let python = try Self.client("/usr/bin/python3", [script.path], environment: environment)
        #expect(python.status == 0, "\(python.error)")
        let seen = try #require(try JSONSerialization.jsonObject(with: python.output) as? [String: Any], "\(python.text)")
        #expect(seen["unlocked_at_once"] as? [String] == [])
        #expect((seen["prompt"] as? String)?.hasPrefix("/org/freedesktop/secrets/prompt/") == true)
        #expect(seen["dismissed"] as? Bool == false)
        #expect(seen["result_signature"] as? String == "ao")
        #expect(seen["result_paths"] as? [String] == ["/org/freedesktop/secrets/aliases/default"])
        #expect(seen["after_unlocked"] as? [String] == ["/org/freedesktop/secrets/aliases/default"])
        #expect(seen["after_prompt"] as? String == "/")
        #expect(seen["dismiss_prompt"] as? Bool == true)
        #expect(seen["dismissed_prompt_gone"] as? Bool == true)
    }

    /// Unlock through a prompt, completed by `dpctl unlock` run a second later; then a prompt dismissed.
    static let promptClient = """
        import json, os, subprocess, threading
        import secretstorage
        from secretstorage.util import DBusAddressWrapper, exec_prompt
        from secretstorage.defines import SS_PATH, SS_PREFIX
        dpctl = os.environ["DPCTL_BINARY"]
        conn = secretstorage.dbus_init()
        service = DBusAddressWrapper(SS_PATH, SS_PREFIX + "Service", conn)
        collection = "/org/freedesktop/secrets/aliases/default"
        unlocked, prompt = service.call("Unlock", "ao", [collection])
        seen = {"unlocked_at_once": unlocked, "prompt": prompt}
        threading.Timer(1.0, lambda: subprocess.run([dpctl, "unlock"], check=True, stdout=subprocess.DEVNULL)).start()
        dismissed, result = exec_prompt(conn, prompt)
        seen["dismissed"] = dismissed
        seen["result_signature"], seen["result_paths"] = result
        seen["after_unlocked"], seen["after_prompt"] = service.call("Unlock", "ao", [collection])
        subprocess.run([dpctl, "lock"], check=True, stdout=subprocess.DEVNULL)
        unlocked, prompt = service.call("Unlock", "ao", [collection])
        seen["dismiss_prompt"] = prompt != "/"
        DBusAddressWrapper(prompt, SS_PREFIX + "Prompt", conn).call("Dismiss", "")
        try:
            DBusAddressWrapper(prompt, SS_PREFIX + "Prompt", conn).call("Prompt", "s", "")
            seen["dismissed_prompt_gone"] = False
        except Exception:
            seen["dismissed_prompt_gone"] = True
        print(json.dumps(seen))
        """

    /// python3-secretstorage against the provider: argument 1 is the session algorithm to force
    /// (`plain` or `dh`). Prints one JSON object of what it saw; exits non-zero on any failure.
    static let pythonClient = """
        import json, os, subprocess, sys
        import secretstorage
        from secretstorage.dhcrypto import Session
        from secretstorage.util import DBusAddressWrapper
        from secretstorage.defines import SS_PATH, SS_PREFIX, ALGORITHM_DH, ALGORITHM_PLAIN

        algorithm = sys.argv[1]
        dpctl = os.environ["DPCTL_BINARY"]
        conn = secretstorage.dbus_init()
        service = DBusAddressWrapper(SS_PATH, SS_PREFIX + "Service", conn)
        session = Session()
        if algorithm == "plain":
            output, path = service.call("OpenSession", "sv", ALGORITHM_PLAIN, ("s", ""))
            session.encrypted = False
        else:
            output, path = service.call("OpenSession", "sv", ALGORITHM_DH, ("ay", session.my_public_key.to_bytes(128, "big")))
            session.set_server_public_key(int.from_bytes(output[1], "big"))
        session.object_path = path
        seen = {"session_encrypted": session.encrypted}
        # get_default_collection() would ignore the session given: the collection with it.
        collection = secretstorage.Collection(conn, "/org/freedesktop/secrets/aliases/default", session=session)
        secret = ("py-secret-" + algorithm).encode() + bytes(range(0, 40))
        item = collection.create_item("py " + algorithm, {"app": "py", "alg": algorithm}, secret, replace=True)
        found = list(collection.search_items({"app": "py", "alg": algorithm}))
        seen["found"] = len(found)
        seen["sessions_used"] = sorted(set([item.session.object_path, found[0].session.object_path, path]))
        seen["secret_ok"] = found[0].get_secret() == secret
        seen["label"] = found[0].get_label()
        seen["attributes"] = found[0].get_attributes()
        found[0].set_label("renamed " + algorithm)
        found[0].set_attributes({"app": "py", "alg": algorithm, "xdg:schema": "org.example.Test"})
        seen["relabeled"] = item.get_label()
        seen["reattributed"] = item.get_attributes()
        seen["locked_before"] = [item.is_locked(), collection.is_locked()]
        subprocess.run([dpctl, "lock"], check=True, stdout=subprocess.DEVNULL)
        seen["locked_after_lock"] = [item.is_locked(), collection.is_locked()]
        seen["found_while_locked"] = len(list(collection.search_items({"app": "py", "alg": algorithm})))
        try:
            item.get_secret()
            seen["secret_while_locked"] = "returned"
        except secretstorage.exceptions.LockedException:
            seen["secret_while_locked"] = "LockedException"
        except Exception as error:
            seen["secret_while_locked"] = type(error).__name__ + ": " + str(error)
        subprocess.run([dpctl, "unlock"], check=True, stdout=subprocess.DEVNULL)
        seen["locked_after_unlock"] = [item.is_locked(), collection.is_locked()]
        seen["secret_after_unlock"] = item.get_secret() == secret
        DBusAddressWrapper(session.object_path, SS_PREFIX + "Session", conn).call("Close", "")
        try:
            item.get_secret()
            seen["secret_after_close"] = "returned"
        except Exception as error:
            seen["secret_after_close"] = getattr(error, "name", type(error).__name__)
        item.delete()
        seen["found_after_delete"] = len(list(collection.search_items({"app": "py", "alg": algorithm})))
        print(json.dumps(seen, sort_keys=True))
        """
}
