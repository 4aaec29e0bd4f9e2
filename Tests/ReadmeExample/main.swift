import DataProtection
import Foundation

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("my-store-\(UUID())")
let store = try ProtectedStore(creatingAt: folder, passcode: "1234")    // a new device and its store
try store.device.unlock(passcode: "1234")                                // first unlock since boot
try store.write(Data("dear diary".utf8), to: "Documents/diary.txt", protection: .complete)
try store.device.lock()                                                   // grace 0: the key goes now
do {
    _ = try store.contents(atPath: "Documents/diary.txt")
} catch {
    print(error.code, error.localizedDescription)   // protectedDataUnavailable: the device is locked
}
