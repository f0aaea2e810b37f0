// The built-in samples and their provenance (web/samples/PROVENANCE.md has
// the same, with the generating script of the synthetic volume).
export const SAMPLES = [
  {
    file: 'coins.png',
    label: 'coins — 303×384 uint8',
    provenance: 'Greek coins from Pompeii. scikit-image sample data; Brooklyn Museum collection, no known copyright restrictions.',
  },
  {
    file: 'camera.png',
    label: 'camera — 512×512 uint8',
    provenance: 'The cameraman. scikit-image sample data; CC0 (Lav Varshney).',
  },
  {
    file: 'astronaut.png',
    label: 'astronaut — 512×512 RGB',
    provenance: 'Eileen Collins, NASA astronaut. scikit-image sample data; NASA, public domain.',
  },
  {
    file: 'hubble_deep_field.jpg',
    label: 'Hubble deep field — 872×1000 RGB',
    provenance: 'Hubble eXtreme Deep Field. scikit-image sample data; NASA, public domain.',
  },
  {
    file: 'DLS_I03_smargon_0001.cbf.gz',
    label: 'diffraction frame — PILATUS3 6M, CBF',
    provenance: 'X-ray diffraction frame, PILATUS3 6M at Diamond Light Source beamline I03 (2527×2463 int32; -1 module gaps, -2 bad pixels). DIALS regression data (github.com/dials/data-files, image_examples).',
  },
  {
    file: 'blobs3d.tif',
    label: 'blobs volume — 64×64×64 uint16 TIFF stack',
    provenance: 'Synthetic volume: scikit-image binary_blobs (3-D, seed 7) smoothed with scipy gaussian_filter, plus Poisson noise; made by web/samples/make_blobs3d.py.',
  },
  {
    file: 'multipage.tif',
    label: 'multipage — 2-page TIFF stack',
    provenance: 'A tiny 2-page TIFF from scikit-image’s test data.',
  },
];
