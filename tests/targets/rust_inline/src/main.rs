// Allocations through a few levels of #[inline] functions and closures, so that a release
// build folds them into main: the inline chain down to src/main.rs is what gdb shows and what
// memtraced must record. `rust_inline N` runs N rounds and prints a checksum (so nothing is
// optimized away).

// std::hint::black_box is not stable in Debian 12's rustc (1.63): a volatile read hides the
// value from the optimizer the same way.
#[inline(always)]
fn black_box(n: usize) -> usize {
    unsafe { std::ptr::read_volatile(&n) }
}

#[inline(always)]
fn make_buffer(n: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(n);
    v.push(n as u64);
    v
}

#[inline(always)]
fn boxed_label(i: usize) -> Box<String> {
    Box::new(format!("label-{}", i))
}

#[inline]
fn build_record(i: usize) -> (Vec<u64>, Box<String>) {
    let fill = |n: usize| make_buffer(black_box(n) + 64);
    (fill(i % 7), boxed_label(i))
}

#[inline(always)]
fn round(i: usize, keep: &mut Vec<(Vec<u64>, Box<String>)>) -> u64 {
    let record = build_record(i);
    let sum = record.0[0] + record.1.len() as u64;
    keep.push(record);
    if keep.len() > 64 {
        keep.clear();
    }
    sum
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let mut keep = Vec::new();
    let mut sum = 0u64;
    for i in 0..rounds {
        sum = sum.wrapping_add(round(black_box(i), &mut keep));
    }
    println!("checksum {}", sum);
}
