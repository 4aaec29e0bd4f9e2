import Foundation
import Testing
@testable import DataProtection

/// Paths are limited when entries are made (`Keys/file-format.md` §11.1): a tree the kernel
/// could not walk (`ENAMETOOLONG`) is never made, and whatever is made can be listed and removed.
@Suite("Store path limits: depth and on-disk length, checked at creation")
struct PathLimitTests {
    @Test("a directory or file deeper than 32 names, or whose encrypted names pass 2048 bytes, is invalidPath; nothing is made")
    func refusedAtCreation() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = fixture.store
        let tooDeep = "/" + Array(repeating: "d", count: 40).joined(separator: "/")
        expectStoreError(.invalidPath, "40 levels") { try store.createDirectory(atPath: tooDeep) }
        expectStoreError(.invalidPath, "a file 33 names deep") {
            try store.write(Data("x".utf8), to: Array(repeating: "d", count: 33).joined(separator: "/"))
        }
        let long = String(repeating: "n", count: 149)
        let tooLong = Array(repeating: long, count: 9).joined(separator: "/")  // 9 x 254 bytes on disk
        expectStoreError(.invalidPath, "9 names of 149 bytes") { try store.createDirectory(atPath: tooLong) }
        #expect(try store.contentsOfDirectory(atPath: "/").isEmpty, "nothing of a refused path is made")

        // At the limits: made, listed, and removed again level by level.
        let deepest = Array(repeating: "d", count: 32)
        try store.createDirectory(atPath: deepest.joined(separator: "/"))
        let longest = Array(repeating: long, count: 8)  // 2032 bytes on disk
        try store.createDirectory(atPath: longest.joined(separator: "/"))
        expectStoreError(.invalidPath, "a file inside the longest directory") {
            try store.write(Data("x".utf8), to: (longest + ["f"]).joined(separator: "/"))
        }
        for components in [deepest, longest] {
            #expect(try store.contentsOfDirectory(atPath: components.dropLast().joined(separator: "/")) == [components.last!])
            for depth in stride(from: components.count, to: 0, by: -1) {
                try store.removeItem(atPath: components.prefix(depth).joined(separator: "/"))
            }
        }
        #expect(try store.contentsOfDirectory(atPath: "/").isEmpty)
    }

    @Test("moving a directory where its tree would pass the limits is invalidPath; the tree stays where it was")
    func movesKeepTheLimits() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let store = fixture.store
        let tree = Array(repeating: "t", count: 20)
        try store.createDirectory(atPath: tree.joined(separator: "/"))
        let deep = Array(repeating: "p", count: 15).joined(separator: "/")
        try store.createDirectory(atPath: deep)
        expectStoreError(.invalidPath, "a 20-level tree moved 15 levels down") { try store.moveItem(atPath: "t", toPath: deep + "/t") }
        #expect(try store.contentsOfDirectory(atPath: "/").sorted() == ["p", "t"])
        try store.moveItem(atPath: "t", toPath: "p/p/t")
        #expect(try store.contentsOfDirectory(atPath: "p/p") == ["p", "t"])
    }

    @Test("below a long root, a path that would pass PATH_MAX with the root is invalidPath at once, and nothing of it is made")
    func longRoot() throws {
        try withScratchDirectory { scratch in
            var root = scratch
            for index in 0..<12 { root.appendPathComponent(String(repeating: Character("\(index % 10)"), count: 200)) }
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
            try store.device.unlock()
            let long = String(repeating: "n", count: 149)
            let path = Array(repeating: long, count: 7).joined(separator: "/")  // 1778 bytes of names below a root of about 2,470
            expectStoreError(.invalidPath, "a path past PATH_MAX with the root") { try store.createDirectory(atPath: path) }
            #expect(try store.contentsOfDirectory(atPath: "/").isEmpty, "nothing of a refused path is made")
            try store.createDirectory(atPath: Array(repeating: long, count: 3).joined(separator: "/"))
            #expect(try store.contentsOfDirectory(atPath: "/") == [long])
        }
    }
}
