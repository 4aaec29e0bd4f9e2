import DataProtection
import DataProtectionBackup
import Foundation
import SocketBridge
import SystemPackage

extension AgentStore {
    /// Writes an age archive of the whole store to `output`, made by the agent at one instant
    /// (`Keys/backup-format.md` §6): while the agent archives, no change of any client runs
    /// (other clients' writes, handle flushes, SQL statements and item changes wait for it,
    /// reads go on), so every file, database and item comes from the same instant. The agent
    /// encrypts; only ciphertext crosses the socket.
    ///
    /// The agent first waits for the changes already running to end, at most 10 s
    /// (`storeBusy` otherwise). Every class the backup reads must be available in the agent:
    /// if one is not, it fails with `protectedDataUnavailable`, naming the files, before a byte
    /// is written.
    ///
    /// - Parameters:
    ///   - output: where the archive goes (a file, a pipe, standard output).
    ///   - recipients: who can open it: X25519 recipients, or one passphrase (sent to the
    ///     agent in a frame wiped once sent; the agent derives the scrypt key).
    ///   - includingItems: whether the migratable keychain items go in (`…ThisDeviceOnly` never do).
    ///   - progress: called with the bytes of the archive written so far.
    /// - Returns: what the archive holds.
    @discardableResult
    public func createBackup(
        to output: FileDescriptor, recipients: [AgeRecipient], includingItems: Bool = true, progress: (UInt64) -> Void = { _ in }
    ) throws(DataProtectionError) -> AgentBackupSummary {
        var passphrase: Passcode?
        var workFactor: UInt8 = 0
        var keys: [String] = []
        for recipient in recipients {
            if let given = recipient.passphrase {
                passphrase = given.passphrase
                workFactor = UInt8(clamping: given.workFactor)
            } else {
                keys.append(recipient.description)
            }
        }
        let (mine, theirs) = try Self.pair()
        let request = AgentRequest.backupCreate(recipients: keys, passphrase: passphrase, workFactor: workFactor, items: includingItems)
        let body = try connection.call(request, passing: FileDescriptor(rawValue: theirs.descriptor)) { () throws(DataProtectionError) in
            theirs.close()
            defer { mine.close() }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var total: UInt64 = 0
            while true {
                try connection.watchdog.waitReadable(mine, waitingOnOthers: true)
                let count: Int
                do {
                    let received = try mine.receive(into: &buffer)
                    if let stray = received.descriptor { _ = try? FileDescriptor(rawValue: stray).close() }
                    count = received.count
                } catch {
                    throw AgentConnection.broken(error)
                }
                if count == 0 { break }
                do {
                    _ = try buffer[0..<count].withUnsafeBytes { try output.writeAll($0) }
                } catch Errno.brokenPipe {
                    throw AgentWireFormat.outputClosed
                } catch {
                    throw DataProtectionError(.ioFailure, "Cannot write the archive: \(error).")
                }
                total += UInt64(count)
                progress(total)
            }
        }
        return try Self.decode(body, AgentBackupSummary.decode)
    }
}
