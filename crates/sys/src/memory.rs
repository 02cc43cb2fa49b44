//! Giving freed heap memory back to the kernel. glibc keeps what a program frees for later allocations, and
//! can return to the kernel only the free memory at the top of the heap: after a burst of connections closes,
//! the memory they used stays resident, scattered between live allocations. `malloc_trim` releases the free
//! pages wherever they are (the safe crates cannot call it).

/// Releases the free pages of every malloc arena to the kernel (glibc's `malloc_trim(0)`); true when some
/// memory was released. It walks the free lists under the arenas' locks, so call it after many frees, not
/// after each. Elsewhere than glibc it does nothing and returns false.
pub fn release_free_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes a plain size (0: keep no extra padding) and only works on the allocator's
        // own state, under its locks; it is safe to call from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_can_be_released() {
        // many small blocks freed in between long-lived ones: free pages in the middle of the heap
        let mut keep = Vec::new();
        let mut drop_later = Vec::new();
        for i in 0..20_000 {
            let b = vec![i as u8; 2000];
            if i % 16 == 0 {
                keep.push(b);
            } else {
                drop_later.push(b);
            }
        }
        drop(drop_later);
        // glibc: something was free to release; elsewhere: nothing done
        assert_eq!(
            release_free_heap(),
            cfg!(all(target_os = "linux", target_env = "gnu"))
        );
        assert_eq!(keep.len(), 1250);
    }
}
