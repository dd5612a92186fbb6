//! Matrix-multiply kernels the benchmarks time: the `gemm` crate for floating point (safe
//! wrapper with bounds checks), a blocked int8 kernel, and a deterministic data generator.
//!
//! Layout: column-major, element (i, j) at `i·rs + j·cs`; a contiguous m×n matrix has rs = 1,
//! cs = m. A transpose is the same buffer with the strides swapped.

use crate::error::{BenchError, Result};
use crate::machine::pool;
use gemm::Parallelism;
use rayon::prelude::*;

/// Where a kernel runs: one thread (no pool), or a pool of exactly `threads` workers.
pub struct Exec {
    threads: usize,
    pool: Option<rayon::ThreadPool>,
}

impl Exec {
    pub fn new(threads: usize) -> Result<Self> {
        let threads = threads.max(1);
        let pool = if threads > 1 {
            Some(pool(threads)?)
        } else {
            None
        };
        Ok(Self { threads, pool })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Run `f` inside this executor's pool, telling it which `gemm` parallelism to use.
    pub fn run<R: Send>(&self, f: impl FnOnce(Parallelism) -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(|| f(Parallelism::Rayon(self.threads))),
            None => f(Parallelism::None),
        }
    }
}

/// A strided read-only matrix view.
#[derive(Debug, Clone, Copy)]
pub struct View<'a, T> {
    pub data: &'a [T],
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a, T> View<'a, T> {
    /// A contiguous column-major rows×cols matrix.
    pub fn col_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        Self {
            data,
            rows,
            cols,
            rs: 1,
            cs: rows,
        }
    }

    /// The transpose, without copying.
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }

    /// True when every element the view addresses lies inside `data`.
    fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.rs)
            .zip((self.cols - 1).checked_mul(self.cs))
            .and_then(|(a, b)| a.checked_add(b));
        matches!(last, Some(l) if l < self.data.len())
    }
}

/// dst (contiguous column-major m×n) = A·B with the `gemm` crate. `one` is the type's 1.
pub fn matmul<T: Copy + Send + Sync + 'static>(
    exec: &Exec,
    dst: &mut [T],
    a: View<'_, T>,
    b: View<'_, T>,
    one: T,
) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || !a.in_bounds() || !b.in_bounds() || dst.len() < m.saturating_mul(n) {
        return Err(BenchError::Invalid(format!(
            "matmul shapes do not agree: A {}×{}, B {}×{}, C buffer {}",
            a.rows,
            a.cols,
            b.rows,
            b.cols,
            dst.len()
        )));
    }
    let dst_ptr = SendPtr(dst.as_mut_ptr());
    exec.run(move |par| {
        let dst_ptr = dst_ptr;
        // SAFETY: shapes and strides were checked against the buffers above; `read_dst = false`
        // so dst is only written; the views borrow immutably and dst mutably for the whole call.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst_ptr.0,
                m as isize,
                1,
                false,
                a.data.as_ptr(),
                a.cs as isize,
                a.rs as isize,
                b.data.as_ptr(),
                b.cs as isize,
                b.rs as isize,
                one,
                one,
                false,
                false,
                false,
                par,
            )
        }
    });
    Ok(())
}

/// A raw pointer that may cross into the pool's closure (the call above is synchronous).
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: used only for the duration of one synchronous `gemm` call that owns the pointee.
unsafe impl<T> Send for SendPtr<T> {}

/// Pack column-major A (m×k) into row-major, so row i is contiguous over k.
pub fn pack_rows_i8(a: &[i8], m: usize, k: usize, out: &mut [i8]) {
    for (i, row) in out.chunks_exact_mut(k.max(1)).take(m).enumerate() {
        for (p, r) in row.iter_mut().enumerate() {
            *r = a.get(i + p * m).copied().unwrap_or(0);
        }
    }
}

/// C (column-major m×n, int32) = A·B for int8 A given packed row-major (`a_rows`, m×k) and
/// column-major B (k×n). Column blocks run in parallel on `exec`; inside a block, rows of A are
/// walked in panels that stay in L2 while 4 columns of B share each load of a row of A.
pub fn matmul_i8(exec: &Exec, c: &mut [i32], a_rows: &[i8], b: &[i8], m: usize, k: usize) {
    const NB: usize = 64; // columns of C per task
    const MB: usize = 64; // rows of A per panel: 64·k bytes, 128 KiB at k = 2048
    let k1 = k.max(1);
    let body = |c: &mut [i32]| {
        c.par_chunks_mut(m.max(1) * NB)
            .enumerate()
            .for_each(|(blk, cblk)| {
                let j0 = blk * NB;
                block_i8(cblk, a_rows, b, m, k1, j0, MB);
            });
    };
    exec.run(|_| body(c));
}

fn block_i8(cblk: &mut [i32], a_rows: &[i8], b: &[i8], m: usize, k: usize, j0: usize, mb: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { block_i8_avx2(cblk, a_rows, b, m, k, j0, mb) };
    }
    block_i8_generic(cblk, a_rows, b, m, k, j0, mb)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_i8_avx2(
    cblk: &mut [i32],
    a_rows: &[i8],
    b: &[i8],
    m: usize,
    k: usize,
    j0: usize,
    mb: usize,
) {
    block_i8_generic(cblk, a_rows, b, m, k, j0, mb)
}

#[inline(always)]
fn block_i8_generic(
    cblk: &mut [i32],
    a_rows: &[i8],
    b: &[i8],
    m: usize,
    k: usize,
    j0: usize,
    mb: usize,
) {
    let ncols = cblk.len() / m.max(1);
    let col = |j: usize| b.get((j0 + j) * k..(j0 + j + 1) * k).unwrap_or(&[]);
    for i0 in (0..m).step_by(mb) {
        let i1 = (i0 + mb).min(m);
        let mut j = 0;
        while j + 4 <= ncols {
            let (b0, b1, b2, b3) = (col(j), col(j + 1), col(j + 2), col(j + 3));
            for i in i0..i1 {
                let a = a_rows.get(i * k..(i + 1) * k).unwrap_or(&[]);
                let s = dot4(a, b0, b1, b2, b3);
                for (q, v) in s.iter().enumerate() {
                    if let Some(x) = cblk.get_mut(i + (j + q) * m) {
                        *x = *v;
                    }
                }
            }
            j += 4;
        }
        for jj in j..ncols {
            let bj = col(jj);
            for i in i0..i1 {
                let a = a_rows.get(i * k..(i + 1) * k).unwrap_or(&[]);
                let s: i32 = a.iter().zip(bj).map(|(&x, &y)| x as i32 * y as i32).sum();
                if let Some(x) = cblk.get_mut(i + jj * m) {
                    *x = s;
                }
            }
        }
    }
}

/// Four int8 dot products sharing the loads of `a` (a widening multiply-add LLVM vectorises).
#[inline(always)]
fn dot4(a: &[i8], b0: &[i8], b1: &[i8], b2: &[i8], b3: &[i8]) -> [i32; 4] {
    let n = a
        .len()
        .min(b0.len())
        .min(b1.len())
        .min(b2.len())
        .min(b3.len());
    let (a, b0, b1, b2, b3) = (&a[..n], &b0[..n], &b1[..n], &b2[..n], &b3[..n]);
    let mut s = [0i32; 4];
    for p in 0..n {
        let x = a[p] as i32;
        s[0] += x * b0[p] as i32;
        s[1] += x * b1[p] as i32;
        s[2] += x * b2[p] as i32;
        s[3] += x * b3[p] as i32;
    }
    s
}

/// Deterministic pseudo-random numbers (xorshift64*, Vigna 2016) so runs and tests repeat.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform integer in [-127, 127].
    pub fn int8(&mut self) -> i8 {
        (((self.next_u64() >> 33) % 255) as i16 - 127) as i8
    }
}

/// Naive triple loop in f64 on column-major inputs: the reference C and |A|·|B| (for bounds).
pub fn reference(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; m * n];
    let mut abs = vec![0.0; m * n];
    for j in 0..n {
        for p in 0..k {
            let bv = b.get(p + j * k).copied().unwrap_or(0.0);
            for i in 0..m {
                let av = a.get(i + p * m).copied().unwrap_or(0.0);
                if let (Some(cv), Some(sv)) = (c.get_mut(i + j * m), abs.get_mut(i + j * m)) {
                    *cv += av * bv;
                    *sv += (av * bv).abs();
                }
            }
        }
    }
    (c, abs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_kernel_is_exact_on_odd_shapes() {
        let (m, k, n) = (67, 45, 70);
        let mut r = Rng::new(7);
        let a: Vec<i8> = (0..m * k).map(|_| r.int8()).collect();
        let b: Vec<i8> = (0..k * n).map(|_| r.int8()).collect();
        let mut ar = vec![0i8; m * k];
        pack_rows_i8(&a, m, k, &mut ar);
        let mut c = vec![0i32; m * n];
        matmul_i8(&Exec::new(2).unwrap(), &mut c, &ar, &b, m, k);
        let af: Vec<f64> = a.iter().map(|&x| x as f64).collect();
        let bf: Vec<f64> = b.iter().map(|&x| x as f64).collect();
        let (want, _) = reference(&af, &bf, m, k, n);
        for (g, w) in c.iter().zip(&want) {
            assert_eq!(*g as f64, *w);
        }
    }

    #[test]
    fn rng_ranges() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let u = r.unit();
            assert!((-1.0..1.0).contains(&u));
            let i = r.int8();
            assert!(i >= -127);
        }
    }

    #[test]
    fn matmul_rejects_mismatched_shapes() {
        let a = vec![1.0f32; 6];
        let b = vec![1.0f32; 6];
        let mut c = vec![0.0f32; 4];
        let e = Exec::new(1).unwrap();
        let r = matmul(
            &e,
            &mut c,
            View::col_major(&a, 2, 3),
            View::col_major(&b, 2, 3),
            1.0,
        );
        assert!(r.is_err());
        // Transposed B (3×2) fits: C = A·Bᵀ-view is 2×2 of all threes.
        matmul(
            &e,
            &mut c,
            View::col_major(&a, 2, 3),
            View::col_major(&b, 2, 3).t(),
            1.0,
        )
        .unwrap();
        assert_eq!(c, vec![3.0; 4]);
    }
}
