# Included by CMakeLists.txt, also where it builds the Python package alone (VTAPE_USE_INSTALLED).
# The Python package (python/, module vtape._vtape): AUTO builds it when Python's development files and nanobind
# (pip install nanobind) are found, ON requires them, OFF never builds it. `pip install .` builds it on its own.
vtape_tristate_option(VTAPE_PYTHON "Build the Python package: AUTO, ON or OFF")
set(VTAPE_WITH_PYTHON OFF)
set(VTAPE_PYTHON_WHY "VTAPE_PYTHON=OFF")
if(NOT VTAPE_PYTHON_MODE STREQUAL "OFF")
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module)
  set(VTAPE_PYTHON_WHY "no Python 3.9+ with its development files")
  if(Python_FOUND)
    execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    OUTPUT_VARIABLE nanobind_ROOT ERROR_QUIET)
    find_package(nanobind CONFIG QUIET)
    set(VTAPE_PYTHON_WHY "no nanobind for ${Python_EXECUTABLE} (pip install nanobind)")
    if(nanobind_FOUND)
      set(VTAPE_WITH_PYTHON ON)
      set(VTAPE_PYTHON_WHY "Python ${Python_VERSION}, nanobind ${nanobind_VERSION}")
    endif()
  endif()
  if(NOT VTAPE_WITH_PYTHON AND VTAPE_PYTHON_MODE STREQUAL "ON")
    message(FATAL_ERROR "VTAPE_PYTHON=ON, but ${VTAPE_PYTHON_WHY}")
  endif()
endif()
message(STATUS "vtape: Python package ${VTAPE_WITH_PYTHON} (VTAPE_PYTHON=${VTAPE_PYTHON}: ${VTAPE_PYTHON_WHY})")
