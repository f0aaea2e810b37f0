//! The conformance probe: before an adapter is trusted, a few tiny kernels
//! with known answers run on it (`shaders/common/probe.wgsl`). A backend
//! that translates WGSL wrongly (GL's undefined remainder of negative
//! integers gave wrong filter edges on llvmpipe) is refused with one clear
//! message instead of giving silently wrong answers.

use bytemuck::{Pod, Zeroable};

use crate::boundary::{Mode, map_coordinate};
use crate::engine::Gpu;
use crate::error::{Error, Result};
use crate::shaders;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    count: u32,
    _pad: [u32; 3],
}

const MODES: [Mode; 5] = [
    Mode::Reflect,
    Mode::Mirror,
    Mode::Nearest,
    Mode::Wrap,
    Mode::Constant,
];

/// (c, n, mode code, 0) for every mode, axis lengths 1 to 8 and coordinates
/// up to three periods out on either side, and the expected answers.
fn cases() -> (Vec<[i32; 4]>, Vec<i32>) {
    let mut cases = Vec::new();
    let mut expected = Vec::new();
    for mode in MODES {
        for n in 1..=8i32 {
            for c in -6 * n - 3..=6 * n + 3 {
                cases.push([c, n, mode.code() as i32, 0]);
                let want = map_coordinate(i64::from(c), n as usize, mode);
                expected.push(want.map_or(-1, |m| m as i32));
            }
        }
    }
    (cases, expected)
}

/// Runs the probe of `source` (the shipped one is [`shaders::PROBE`]; tests
/// pass broken variants) and says what the adapter got wrong.
pub async fn check_source(gpu: &Gpu, source: &str) -> Result<()> {
    let (cases, expected) = cases();
    let count = cases.len();
    let module = if source == shaders::PROBE {
        shaders::Shader::Probe.into()
    } else {
        gpu.generated(format!("probe {source}"), || source.to_string())?
    };
    let pipeline = gpu.pipeline(module, "probe")?;
    let case_buf = gpu.storage((count * 16) as u64, "probe cases").await?;
    let answer_bytes = ((count + 2) * 4) as u64;
    let answer_buf = match gpu.storage(answer_bytes, "probe answers").await {
        Ok(b) => b,
        Err(e) => {
            gpu.recycle(case_buf);
            return Err(e);
        }
    };
    gpu.upload(&case_buf, bytemuck::cast_slice(&cases));
    gpu.upload(&answer_buf, &vec![0u8; answer_bytes as usize]);
    let params = gpu.uniform(&Params {
        count: count as u32,
        _pad: [0; 3],
    });
    let outcome = async {
        let mut rec = gpu.recorder();
        rec.dispatch(&pipeline, &[&params, &case_buf, &answer_buf], count as u64)?;
        rec.submit().await?;
        gpu.read_vec::<i32>(&answer_buf, count + 2).await
    }
    .await;
    gpu.recycle(case_buf);
    gpu.recycle(answer_buf);
    let answers = outcome?;
    let refuse = |what: String| {
        let s = gpu.summary();
        Err(Error::Nonconformant {
            adapter: format!("{} ({})", s.name, s.backend),
            what,
        })
    };
    for (i, (case, want)) in cases.iter().zip(&expected).enumerate() {
        if answers[i] != *want {
            let mode = MODES[case[2] as usize];
            return refuse(format!(
                "boundary mode {}: coordinate {} on an axis of {} mapped to {}, expected {}",
                mode.name(),
                case[0],
                case[1],
                answers[i],
                want
            ));
        }
    }
    let sum = (count * (count - 1) / 2) as i32;
    if answers[count] != sum {
        return refuse(format!(
            "atomic sum of 0..{count} gave {}, expected {sum}",
            answers[count]
        ));
    }
    let wrapped = 0xffff_ffffu32.wrapping_mul(3) as i32;
    if answers[count + 1] != wrapped {
        return refuse(format!(
            "u32 wrap-around gave {:#x}, expected {:#x}",
            answers[count + 1],
            wrapped
        ));
    }
    Ok(())
}

/// The probe every device runs when it opens.
pub(crate) async fn check(gpu: &Gpu) -> Result<()> {
    check_source(gpu, shaders::PROBE).await
}

#[cfg(test)]
mod wgsl_layouts {
    use super::*;
    use crate::layout::mirror_layout;

    mirror_layout!(
        params_matches_wgsl,
        Params,
        crate::shaders::PROBE,
        "Params",
        [count, _pad]
    );
}
