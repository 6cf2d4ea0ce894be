internal import CSystem

public enum Terminal {
    /// The width in columns of the terminal `fd` is on (TIOCGWINSZ), or nil when it is not a terminal or has no
    /// size (a pseudo-terminal nobody sized).
    public static func columns(_ fd: Int32) -> Int? {
        let columns = Int(haul_terminal_columns(fd))
        return columns > 0 ? columns : nil
    }

    /// Its height in rows, or nil as for `columns`.
    public static func rows(_ fd: Int32) -> Int? {
        let rows = Int(haul_terminal_rows(fd))
        return rows > 0 ? rows : nil
    }
}
