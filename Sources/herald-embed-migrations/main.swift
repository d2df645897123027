import Foundation

// Writes a Swift file declaring `Migration.embedded` from numbered SQL files and
// `FunctionFile.embedded` from the function files, for the EmbedMigrations build plugin:
// herald-embed-migrations OUTPUT MIGRATION.sql... --functions FUNCTIONS.sql...

let arguments = Array(CommandLine.arguments.dropFirst())
guard let output = arguments.first else {
    FileHandle.standardError.write(
        Data("usage: herald-embed-migrations OUTPUT MIGRATION.sql... --functions FUNCTIONS.sql...\n".utf8))
    exit(64)
}
let rest = arguments.dropFirst()
let split = rest.firstIndex(of: "--functions") ?? rest.endIndex
let migrationPaths = rest[..<split]
let functionPaths = split < rest.endIndex ? rest[rest.index(after: split)...] : []

/// The file's text as a Swift raw string literal, delimited by more #s than the SQL ever puts
/// after a quote.
func literal(_ path: String) throws -> String {
    let sql = try String(contentsOfFile: path, encoding: .utf8)
    var hashes = "#"
    while sql.contains("\"" + hashes) { hashes += "#" }
    return "\(hashes)\"\"\"\n" + sql + (sql.hasSuffix("\n") ? "" : "\n") + "\"\"\"\(hashes)"
}

var source = """
    // Generated at build time from migrations/*.sql and migrations/functions/*.sql by the
    // EmbedMigrations plugin.

    extension Migration {
        /// Every migration in `migrations/`, in order.
        public static let embedded: [Migration] = [

    """
for path in migrationPaths {
    let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
    guard let version = Int(name.prefix { $0.isNumber }) else {
        FileHandle.standardError.write(Data("\(path): a migration's name starts with its number\n".utf8))
        exit(65)
    }
    source += "        Migration(version: \(version), name: \"\(name)\", sql: \(try literal(path))),\n"
}
source += """
        ]
    }

    extension FunctionFile {
        /// Every function file in `migrations/functions/`, in name order (the order they apply in).
        public static let embedded: [FunctionFile] = [

    """
for path in functionPaths {
    let name = URL(fileURLWithPath: path).lastPathComponent
    source += "        FunctionFile(name: \"\(name)\", sql: \(try literal(path))),\n"
}
source += "    ]\n}\n"
try source.write(toFile: output, atomically: true, encoding: .utf8)
