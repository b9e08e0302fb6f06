/*
 * phantom.h -- synthetic 3D phantoms for the bundled demo network.
 *
 * One implementation serves both the training script (through the swi-phantom
 * tool) and `swi demo`, so the network is trained and tested on the same kind of
 * data. Pure C, deterministic for a given seed on every platform.
 */
#ifndef SWI_PHANTOM_H
#define SWI_PHANTOM_H

#include <stdint.h>

/** Classes of a phantom label map: 0 background, then the structures. */
#define SWI_PHANTOM_CLASSES 4

/** Generate a phantom of size[0] x size[1] x size[2] voxels (each >= 16).
 *  image:  float32 [size0, size1, size2], C order (last index fastest)
 *  labels: uint8 ground truth, same layout, values 0..SWI_PHANTOM_CLASSES-1.
 *  Returns 0, or -1 on invalid arguments. */
int swi_phantom_generate(uint64_t seed, const int64_t size[3], float *image, uint8_t *labels);

#endif
