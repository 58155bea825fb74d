//! Locks that are taken whatever a panicking holder left behind. Every
//! std lock of the broker guards state that a panic cannot leave half
//! changed (a pool's state is only changed through calls that either
//! complete or leave it as it was, and the other tables hold whole values),
//! so a poisoned lock is still usable: one failed request must not make
//! every later one panic too. These are the one spelling of that choice.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex`] taken or consumed even when poisoned.
pub trait MutexExt<T> {
    /// [`Mutex::lock`], recovering the guard from a poisoned lock.
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;
    /// [`Mutex::into_inner`], recovering the value from a poisoned lock.
    fn into_inner_or_recover(self) -> T;
}

impl<T> MutexExt<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn into_inner_or_recover(self) -> T {
        self.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock`] taken even when poisoned.
pub trait RwLockExt<T> {
    /// [`RwLock::read`], recovering the guard from a poisoned lock.
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T>;
    /// [`RwLock::write`], recovering the guard from a poisoned lock.
    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RwLockExt<T> for RwLock<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}
