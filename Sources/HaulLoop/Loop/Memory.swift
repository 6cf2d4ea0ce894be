internal import CSystem

public enum Memory {
    /// Gives the pages malloc holds free back to the kernel. After start-up has read every stored download (rows,
    /// decoding, the SQLite page cache) the heap keeps that high-water mark as resident memory otherwise.
    public static func returnFreePages() {
        malloc_trim(0)
    }
}
