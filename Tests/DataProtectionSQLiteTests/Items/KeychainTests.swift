import DataProtection
import DataProtectionSQLite
import Foundation
import Testing

@Suite struct KeychainTests {
    @Test func addFindUpdateDeleteRoundTrip() throws {
        try withDatabaseStore { fixture in
            let keychain = fixture.store.keychain
            let item = try keychain.add(ItemSecret("pa55"), label: "Mail", attributes: ["service": "mail", "account": "ann"])
            #expect(item.id.count == 32 && item.id.allSatisfy { $0.isHexDigit && !$0.isUppercase })
            #expect(item.accessibility == .whenUnlocked)
            #expect(try keychain.secret(service: "mail", account: "ann").secretString == "pa55")
            #expect(try keychain.item(matching: ["account": "ann"]) == item)
            #expect(try keychain.item(withID: item.id).label == "Mail")
            // Same attribute set: fileExists, nothing changed; with replace: same id, new secret.
            expectCode(.fileExists) { try keychain.add(ItemSecret("other"), label: "x", attributes: ["account": "ann", "service": "mail"]) }
            #expect(try keychain.secret(ofItemWithID: item.id).secretString == "pa55")
            let replaced = try keychain.add(ItemSecret("new"), label: "Mail 2", attributes: ["service": "mail", "account": "ann"], replacing: true)
            #expect(replaced.id == item.id && replaced.creationDate == item.creationDate && replaced.label == "Mail 2")
            #expect(try keychain.secret(ofItemWithID: item.id).secretString == "new")
            // A superset of attributes is another item; a lookup by a subset finds both.
            try keychain.add(ItemSecret("b"), label: "B", attributes: ["service": "mail", "account": "ann", "host": "imap"])
            #expect(try keychain.items(matching: ["service": "mail"]).items.count == 2)
            #expect(try keychain.items(matching: [:]).items.count == 2)
            #expect(try keychain.items(matching: ["service": "mail", "host": "smtp"]).items.isEmpty)
            // Update by attributes, then by id; a clash with another item's set is fileExists.
            let updated = try keychain.update(matching: ["host": "imap"], label: "IMAP", secret: ItemSecret("c"))
            #expect(updated.map(\.label) == ["IMAP"])
            #expect(try keychain.secret(matching: ["host": "imap"]).secretString == "c")
            expectCode(.fileExists) { try keychain.update(matching: ["host": "imap"], attributes: ["service": "mail", "account": "ann"]) }
            try keychain.updateItem(withID: item.id, attributes: ["service": "mail", "account": "bob"])
            #expect(try keychain.item(withID: item.id).account == "bob")
            #expect(try keychain.items(matching: ["account": "ann"]).items.map(\.label) == ["IMAP"])
            expectCode(.fileNotFound) { _ = try keychain.secret(service: "mail", account: "carl") }
            // Delete.
            #expect(try keychain.delete(matching: ["service": "mail"]) == 2)
            expectCode(.fileNotFound) { try keychain.delete(matching: ["service": "mail"]) }
            expectCode(.fileNotFound) { _ = try keychain.item(withID: item.id) }
            expectCode(.invalidArgument) { try keychain.add(ItemSecret("x"), label: "x", attributes: ["": "y"]) }
        }
    }

    @Test func itemsAreNotFilesOfTheStore() throws {
        try withDatabaseStore { fixture in
            try fixture.store.keychain.add(ItemSecret("s"), label: "l", attributes: ["a": "b"])
            try fixture.store.write(Data("f".utf8), to: "file.txt")
            #expect(try fixture.store.contentsOfDirectory(atPath: "/") == ["file.txt"])
            expectCode(.invalidPath) { try fixture.store.removeItem(atPath: "/.dataprotection-items") }
            expectCode(.invalidPath) { try fixture.store.write(Data(), to: ".dataprotection-items/whenUnlocked/items.db") }
            expectCode(.invalidPath) { _ = try fixture.store.contentsOfDirectory(atPath: ".dataprotection-items") }
            expectCode(.invalidPath) { try fixture.store.moveItem(atPath: "file.txt", toPath: ".dataprotection-items") }
            expectCode(.invalidPath) { _ = try ProtectedDatabase(atPath: ".dataprotection-items/whenUnlocked/items.db", in: fixture.store) }
            #expect(!fixture.store.fileExists(atPath: ".dataprotection-items"))
            #expect(try fixture.store.keychain.secret(matching: ["a": "b"]).secretString == "s")
        }
    }

    @Test func eachAccessibilityAcrossLockUnlockRebootPasscodeRemovalAndErase() throws {
        try withDatabaseStore { fixture in
            var keychain: Keychain? = fixture.store.keychain
            for accessibility in ItemAccessibility.allCases {
                try keychain!.add(ItemSecret(accessibility.rawValue), label: accessibility.rawValue, attributes: ["kind": accessibility.rawValue],
                                  accessibility: accessibility)
            }
            func readable(_ keychain: Keychain) throws -> Set<ItemAccessibility> {
                Set(try keychain.items(matching: [:]).items.map(\.accessibility))
            }
            #expect(try readable(keychain!) == Set(ItemAccessibility.allCases))

            // Locked (grace 0): only the afterFirstUnlock ones; the others are reported locked.
            try fixture.device.lock()
            let locked = try keychain!.items(matching: [:])
            #expect(Set(locked.items.map(\.accessibility)) == [.afterFirstUnlock, .afterFirstUnlockThisDeviceOnly])
            #expect(locked.lockedAccessibilities == [.whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly])
            #expect(try keychain!.secret(matching: ["kind": "afterFirstUnlock"]).secretString == "afterFirstUnlock")
            expectCode(.protectedDataUnavailable) { _ = try keychain!.secret(matching: ["kind": "whenUnlocked"]) }
            let hidden = try keychain!.items(matching: ["kind": "whenUnlocked"]).items
            #expect(hidden.isEmpty)
            expectCode(.protectedDataUnavailable) { try keychain!.add(ItemSecret("x"), label: "x", attributes: ["n": "1"]) }
            try keychain!.add(ItemSecret("x"), label: "x", attributes: ["n": "1"], accessibility: .afterFirstUnlock)
            try keychain!.delete(matching: ["n": "1"])

            // Unlocked again: everything.
            try fixture.unlock()
            #expect(try readable(keychain!) == Set(ItemAccessibility.allCases))

            // Reboot: nothing until the first unlock, then everything (persisted).
            try fixture.device.reboot()
            let booted = try keychain!.items(matching: [:])
            #expect(booted.items.isEmpty && booted.lockedAccessibilities == Set(ItemAccessibility.allCases))
            try fixture.unlock()
            #expect(try readable(keychain!) == Set(ItemAccessibility.allCases))
            try fixture.device.lock()
            #expect(try readable(keychain!) == [.afterFirstUnlock, .afterFirstUnlockThisDeviceOnly])
            try fixture.unlock()

            // Passcode removal deletes the passcode-bound items, and only them; without a
            // passcode they cannot be added; a passcode set again does not bring them back.
            try fixture.device.removePasscode("1234")
            #expect(try readable(keychain!) == Set(ItemAccessibility.allCases).subtracting([.whenPasscodeSetThisDeviceOnly]))
            expectCode(.fileNotFound) { _ = try keychain!.secret(matching: ["kind": "whenPasscodeSetThisDeviceOnly"]) }
            expectCode(.protectedDataUnavailable) {
                try keychain!.add(ItemSecret("p"), label: "p", attributes: ["p": "1"], accessibility: .whenPasscodeSetThisDeviceOnly)
            }
            try fixture.device.setPasscode("1234")
            expectCode(.fileNotFound) { _ = try keychain!.secret(matching: ["kind": "whenPasscodeSetThisDeviceOnly"]) }
            try keychain!.add(ItemSecret("p"), label: "p", attributes: ["kind": "whenPasscodeSetThisDeviceOnly"], accessibility: .whenPasscodeSetThisDeviceOnly)

            // A new process (a new keychain on a reopened store) sees the same items.
            keychain = nil
            let directory = fixture.root
            _ = directory
            #expect(try readable(fixture.store.keychain) == Set(ItemAccessibility.allCases))

            // Erase: every item gone, whatever its class.
            try fixture.device.erase()
            try fixture.device.unlock()
            let erased = fixture.store.keychain
            #expect(try erased.items(matching: [:]) == ItemSearch(items: [], lockedAccessibilities: []))
            try erased.add(ItemSecret("after"), label: "a", attributes: ["kind": "whenUnlocked"])
            #expect(try erased.secret(matching: ["kind": "whenUnlocked"]).secretString == "after")
        }
    }

    @Test func passcodeBoundItemsGoEvenWhenTheKeychainWasNotOpen() throws {
        try withDatabaseStore { fixture in
            do {
                let keychain = fixture.store.keychain
                try keychain.add(ItemSecret("p"), label: "p", attributes: ["p": "1"], accessibility: .whenPasscodeSetThisDeviceOnly)
            }
            try fixture.device.removePasscode("1234")
            try fixture.device.setPasscode("5678")
            let keychain = fixture.store.keychain
            expectCode(.fileNotFound) { _ = try keychain.secret(matching: ["p": "1"]) }
        }
    }

    @Test func migratableItemsLeaveThisDeviceOnlyOutAndRestoreKeepsThem() throws {
        try withDatabaseStore { fixture in
            let keychain = fixture.store.keychain
            for accessibility in ItemAccessibility.allCases {
                try keychain.add(ItemSecret("s-" + accessibility.rawValue), label: accessibility.rawValue, attributes: ["kind": accessibility.rawValue],
                                 accessibility: accessibility)
            }
            let taken = try keychain.migratableItems()
            #expect(Set(taken.map(\.item.accessibility)) == [.whenUnlocked, .afterFirstUnlock])
            #expect(taken.allSatisfy { $0.secret.secretString == "s-" + $0.item.accessibility.rawValue })
            try fixture.device.lock()
            expectCode(.protectedDataUnavailable) { _ = try keychain.migratableItems() }
            try fixture.unlock()
            let before = keychain.generation
            expectCode(.fileExists) { try keychain.restore(taken) }
            #expect(keychain.generation == before)

            try withDatabaseStore { other in
                let target = other.store.keychain
                try target.restore(taken)
                #expect(target.generation == 1)
                let restored = try target.items(matching: [:]).items
                #expect(restored.map(\.id).sorted() == taken.map(\.item.id).sorted())
                #expect(try target.secret(matching: ["kind": "afterFirstUnlock"]).secretString == "s-afterFirstUnlock")
                #expect(Set(restored) == Set(taken.map(\.item)))
            }
        }
    }

    @Test func generationAndChangesFollowEveryChange() async throws {
        let fixture = try DatabaseFixture()
        defer { fixture.remove() }
        let keychain = fixture.store.keychain
        let changes = keychain.changes()
        #expect(keychain.generation == 0)
        let item = try keychain.add(ItemSecret("1"), label: "a", attributes: ["a": "1"])
        try keychain.updateItem(withID: item.id, secret: ItemSecret("2"))
        _ = try keychain.items(matching: [:])
        try keychain.deleteItem(withID: item.id)
        #expect(keychain.generation == 3)
        var seen: [UInt64] = []
        for await generation in changes {
            seen.append(generation)
            if seen.count == 3 { break }
        }
        #expect(seen == [1, 2, 3])
    }

    @Test func secretsAreNeverInTheClearOnDisk() throws {
        try withDatabaseStore { fixture in
            let keychain = fixture.store.keychain
            let needles = ItemAccessibility.allCases.map { "needle-\($0.rawValue)-\(UUID().uuidString)" }
            for (accessibility, needle) in zip(ItemAccessibility.allCases, needles) {
                try keychain.add(ItemSecret(needle), label: "label-" + needle, attributes: ["attr": needle], accessibility: accessibility)
            }
            try keychain.update(matching: ["attr": needles[0]], secret: ItemSecret(needles[0] + "-updated"))
            let deviceFiles = FileManager.default.enumerator(at: fixture.device.directory, includingPropertiesForKeys: nil)?
                .compactMap { ($0 as? URL).flatMap { try? Data(contentsOf: $0) } } ?? []
            let onDisk = Array(fixture.filesOnDisk().values) + deviceFiles
            #expect(onDisk.count > 3)
            for needle in needles {
                for bytes in onDisk {
                    #expect(bytes.range(of: Data(needle.utf8)) == nil, "a secret, label or attribute in the clear on disk")
                }
            }
            for bytes in onDisk {
                #expect(bytes.range(of: Data("SQLite format 3".utf8)) == nil)
            }
        }
    }
}
