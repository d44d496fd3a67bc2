"""Teachers: label positions with an outside engine or network, so a run can start from what others know.

dlshogi did not start from zero: its first networks learned from positions an engine labelled. This
package labels positions with a teacher and writes dlshogi's hcpe3 (policy as visit-like counts, the
teacher's win rate as the eval, the game's result), which `dlzero train --hcpe` and dlshogi's own
trainer read, and from which `dlzero loop --init-from` trains a run's generation 0.

Modules: `base` (the `Teacher` interface, labels -> hcpe3 plies), `spec` (`--teacher` strings),
`usi` (any USI engine), `onnx_miniosl` (miniosl's pretrained network, an optional extra), `sources`
(opening suites, hcpe3 shards, CSA/KIF records), `label` (the teacher's own games, relabelling),
`driver` (parts, workers, progress: `teach`).
"""

from dlzero.teacher.base import Label, Query, Teacher, TeacherError
from dlzero.teacher.driver import TeachReport, TeachSettings, teach
from dlzero.teacher.label import PlaySettings
from dlzero.teacher.spec import open_teacher, parse_spec

__all__ = ["Label", "PlaySettings", "Query", "TeachReport", "TeachSettings", "Teacher", "TeacherError",
           "open_teacher", "parse_spec", "teach"]
