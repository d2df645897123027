import Foundation

// Writes a Swift file declaring `Migration.embedded` from numbered SQL files, for the
// EmbedMigrations build plugin: herald-embed-migrations OUTPUT FILE.sql...

let arguments = CommandLine.arguments.dropFirst()
guard let output = arguments.first else {
    FileHandle.standardError.write(Data("usage: herald-embed-migrations OUTPUT FILE.sql...\n".utf8))
    exit(64)
}
var source = """
    // Generated at build time from migrations/*.sql by the EmbedMigrations plugin.

    extension Migration {
        /// Every migration in `migrations/`, in order.
        public static let embedded: [Migration] = [

    """
for path in arguments.dropFirst() {
    let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
    guard let version = Int(name.prefix { $0.isNumber }) else {
        FileHandle.standardError.write(Data("\(path): a migration's name starts with its number\n".utf8))
        exit(65)
    }
    let sql = try String(contentsOfFile: path, encoding: .utf8)
    // A raw string delimited by more #s than the SQL ever puts after a quote.
    var hashes = "#"
    while sql.contains("\"" + hashes) { hashes += "#" }
    source += "        Migration(version: \(version), name: \"\(name)\", sql: \(hashes)\"\"\"\n"
    source += sql + (sql.hasSuffix("\n") ? "" : "\n")
    source += "\"\"\"\(hashes)),\n"
}
source += "    ]\n}\n"
try source.write(toFile: output, atomically: true, encoding: .utf8)
