//! One training step of a small multilayer perceptron written on the benchmark's GEMM: the
//! realistic kernel for thread scaling. Matrix products run on all threads (the `gemm` crate);
//! the element-wise parts (bias-free ReLU, softmax cross-entropy, SGD update) run on one thread,
//! as in a naive framework — they are the serial fraction Amdahl's law is about.
//!
//! Layout: column-major, features × batch. Forward Z₁ = W₁X, H₁ = relu(Z₁), …, logits Z_L;
//! loss = mean cross-entropy of softmax(Z_L). Backward (standard backpropagation, e.g. Goodfellow,
//! Bengio & Courville, "Deep Learning", §6.5): dZ_L = (softmax − onehot)/B, dW_l = dZ_l·H_{l−1}ᵀ,
//! dH_{l−1} = W_lᵀ·dZ_l, dZ_{l−1} = dH_{l−1} ⊙ [Z_{l−1} > 0]; W_l ← W_l − η·dW_l.

use crate::error::{BenchError, Result};
use crate::kernels::{matmul, Exec, Rng, View};

/// Layer widths, input first, classes last, and the batch size.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct MlpShape {
    pub widths: Vec<usize>,
    pub batch: usize,
}

impl MlpShape {
    /// 784-512-512-10 (an MNIST-sized MLP), batch 256.
    pub fn full() -> Self {
        Self {
            widths: vec![784, 512, 512, 10],
            batch: 256,
        }
    }

    pub fn quick() -> Self {
        Self {
            widths: vec![64, 64, 64, 10],
            batch: 32,
        }
    }

    /// FLOPs of one step counted on the GEMMs only: 3 products (forward, dW, dH) of
    /// 2·out·in·batch each per layer (the first layer needs no dH, counted anyway as frameworks do).
    pub fn gemm_flops(&self) -> f64 {
        self.widths
            .windows(2)
            .map(|w| 6.0 * w[0] as f64 * w[1] as f64 * self.batch as f64)
            .sum()
    }
}

/// Weights, a fixed batch and the buffers of one step.
pub struct Mlp {
    shape: MlpShape,
    weights: Vec<Vec<f32>>,
    x: Vec<f32>,
    labels: Vec<usize>,
    /// Pre-activations Z_l and activations H_l per layer (H_0 = X is `x`).
    z: Vec<Vec<f32>>,
    h: Vec<Vec<f32>>,
    grad_w: Vec<Vec<f32>>,
    learning_rate: f32,
}

impl Mlp {
    pub fn new(shape: MlpShape, seed: u64) -> Result<Self> {
        if shape.widths.len() < 2 || shape.widths.contains(&0) || shape.batch == 0 {
            return Err(BenchError::Invalid(
                "an MLP needs at least two layer widths and a batch, all positive".into(),
            ));
        }
        let mut rng = Rng::new(seed);
        let b = shape.batch;
        // He initialisation, uniform with the same variance: U(−√(6/in), √(6/in)).
        let weights = shape
            .widths
            .windows(2)
            .map(|w| {
                let lim = (6.0 / w[0] as f64).sqrt();
                (0..w[0] * w[1])
                    .map(|_| (rng.unit() * lim) as f32)
                    .collect()
            })
            .collect();
        let d0 = shape.widths[0];
        let classes = *shape.widths.last().unwrap_or(&1);
        let x = (0..d0 * b).map(|_| rng.unit() as f32).collect();
        let labels = (0..b).map(|i| i % classes).collect();
        let layer_bufs = |f: &dyn Fn(&[usize]) -> usize| {
            shape
                .widths
                .windows(2)
                .map(|w| vec![0.0f32; f(w)])
                .collect::<Vec<_>>()
        };
        Ok(Self {
            z: layer_bufs(&|w| w[1] * b),
            h: layer_bufs(&|w| w[1] * b),
            grad_w: layer_bufs(&|w| w[0] * w[1]),
            weights,
            x,
            labels,
            learning_rate: 0.05,
            shape,
        })
    }

    /// One forward + backward + SGD step on the fixed batch; returns the loss before the update.
    pub fn step(&mut self, exec: &Exec) -> Result<f32> {
        let b = self.shape.batch;
        let w = self.shape.widths.clone();
        let layers = w.len() - 1;
        // Forward.
        for l in 0..layers {
            let input: &[f32] = if l == 0 { &self.x } else { &self.h[l - 1] };
            matmul(
                exec,
                &mut self.z[l],
                View::col_major(&self.weights[l], w[l + 1], w[l]),
                View::col_major(input, w[l], b),
                1.0,
            )?;
            if l + 1 < layers {
                for (h, z) in self.h[l].iter_mut().zip(&self.z[l]) {
                    *h = z.max(0.0);
                }
            }
        }
        // Softmax cross-entropy; dZ_L written into h[L-1] (unused as an activation).
        let classes = w[layers];
        let mut loss = 0.0f32;
        let (zl, dz) = (&self.z[layers - 1], &mut self.h[layers - 1]);
        for (j, (zc, dc)) in zl
            .chunks_exact(classes)
            .zip(dz.chunks_exact_mut(classes))
            .enumerate()
        {
            let max = zc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = zc.iter().map(|v| (v - max).exp()).sum();
            let label = self.labels.get(j).copied().unwrap_or(0);
            for (c, (zv, d)) in zc.iter().zip(dc.iter_mut()).enumerate() {
                let p = (zv - max).exp() / sum;
                *d = (p - if c == label { 1.0 } else { 0.0 }) / b as f32;
                if c == label {
                    loss -= p.max(f32::MIN_POSITIVE).ln() / b as f32;
                }
            }
        }
        // Backward: dZ_l lives in h[l]; dH_{l−1} goes to z[l−1] then is masked in place.
        for l in (0..layers).rev() {
            let input: &[f32] = if l == 0 { &self.x } else { &self.h[l - 1] };
            matmul(
                exec,
                &mut self.grad_w[l],
                View::col_major(&self.h[l], w[l + 1], b),
                View::col_major(input, w[l], b).t(),
                1.0,
            )?;
            if l > 0 {
                let (lower, upper) = self.h.split_at_mut(l);
                let mut dh = vec![0.0f32; w[l] * b];
                matmul(
                    exec,
                    &mut dh,
                    View::col_major(&self.weights[l], w[l + 1], w[l]).t(),
                    View::col_major(&upper[0], w[l + 1], b),
                    1.0,
                )?;
                for ((d, g), z) in lower[l - 1].iter_mut().zip(&dh).zip(&self.z[l - 1]) {
                    *d = if *z > 0.0 { *g } else { 0.0 };
                }
            }
        }
        for (wl, gl) in self.weights.iter_mut().zip(&self.grad_w) {
            for (wv, gv) in wl.iter_mut().zip(gl) {
                *wv -= self.learning_rate * gv;
            }
        }
        Ok(loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_lowers_the_loss_on_a_fixed_batch() {
        let mut m = Mlp::new(MlpShape::quick(), 3).unwrap();
        let exec = Exec::new(2).unwrap();
        let first = m.step(&exec).unwrap();
        // Untrained: loss ≈ ln(10) = 2.30 for 10 balanced classes (within 1.0 given the init).
        assert!((first - 10f32.ln()).abs() < 1.0, "{first}");
        let mut last = first;
        for _ in 0..30 {
            last = m.step(&exec).unwrap();
        }
        assert!(last < 0.7 * first, "{first} → {last}");
    }

    #[test]
    fn flop_count_of_the_shape() {
        let s = MlpShape {
            widths: vec![4, 3, 2],
            batch: 5,
        };
        assert_eq!(s.gemm_flops(), 6.0 * 5.0 * (12.0 + 6.0));
        assert!(Mlp::new(
            MlpShape {
                widths: vec![4],
                batch: 1
            },
            1
        )
        .is_err());
    }
}
