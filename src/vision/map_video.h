/* map_video's one fact for tests and benches: how many frames its
 * decoders have produced in this process (skipped frames not counted). */
#ifndef SL_VISION_MAP_VIDEO_H
#define SL_VISION_MAP_VIDEO_H

long long sl__video_frames_decoded(void);

#endif
